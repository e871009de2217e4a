"""`python -m rocmft.serve.ask --prompt-file=PATH -- <LLaMA-Factory inference args>`: one answer, on stdout.

Runs where the model runs (this venv, or the arch's image), like the training worker. LLaMA-Factory's chat
CLI is a REPL; a script wants one answer, so this asks LLaMA-Factory's own ChatModel (the engine behind
`llamafactory-cli chat` and `api`) once. Everything the libraries print while loading goes to stderr, at
the file-descriptor level, so stdout holds the answer alone. The prompt comes in a private file
(serve/private_file.py), never in argv, where every local user's `ps` would show it.

`--base-too`: the base model answers first, then the run's adapters are merged into it as LLaMA-Factory
merges them for inference (model/adapter.py: PeftModel.from_pretrained, merge_and_unload) and the tuned model
answers; stdout holds one JSON line {"base": ..., "tuned": ...}. One process and one model load instead of
two: importing the stack and loading the model is most of an answer's time on CPU (issue 23's demo).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .private_file import read


def _without_adapters(lf_args: list[str]) -> tuple[list[str], list[str]]:
    """(the arguments with `--adapter_name_or_path X` taken out, the adapters X named, comma-separated)."""
    rest: list[str] = []
    adapters: list[str] = []
    items = iter(lf_args)
    for item in items:
        if item == "--adapter_name_or_path":
            adapters += [a.strip() for a in next(items, "").split(",") if a.strip()]
        elif item.startswith("--adapter_name_or_path="):
            adapters += [a.strip() for a in item.partition("=")[2].split(",") if a.strip()]
        else:
            rest.append(item)
    return rest, adapters


def _answer(model, prompt: str) -> str:
    responses = model.chat([{"role": "user", "content": prompt}])
    return responses[0].response_text if responses else ""


def _merge(model, adapters: list[str]) -> None:
    from peft import PeftModel

    engine = model.engine
    for adapter in adapters:
        engine.model = PeftModel.from_pretrained(engine.model, adapter).merge_and_unload()
    engine.model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.serve.ask")
    parser.add_argument("--prompt-file", required=True, help="a file holding the prompt (serve/private_file.py)")
    parser.add_argument("--base-too", action="store_true",
                        help="answer with the base model too: one JSON line {base, tuned} on stdout")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then LLaMA-Factory's inference arguments")
    ns = parser.parse_args(argv)
    prompt = read(ns.prompt_file)
    lf_args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    adapters: list[str] = []
    if ns.base_too:
        lf_args, adapters = _without_adapters(lf_args)

    answer_fd = os.dup(1)
    os.dup2(2, 1)  # C extensions and loggers that hold sys.stdout write to stderr too
    try:
        from llamafactory.chat import ChatModel

        model = ChatModel(lf_args)
        text = _answer(model, prompt)
        if ns.base_too:
            base = text
            _merge(model, adapters)
            text = _answer(model, prompt)
    finally:
        sys.stdout.flush()
        os.dup2(answer_fd, 1)
        os.close(answer_fd)
    if ns.base_too:
        print(json.dumps({"base": base, "tuned": text}, ensure_ascii=False), flush=True)
        return 0
    print(text, flush=True)
    if not text.strip():
        print("[rocmft] the model's answer is empty: it ended its turn at once", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
