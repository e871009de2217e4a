"""`python -m rocmft.serve.ask --prompt=TEXT -- <LLaMA-Factory inference args>`: one answer, on stdout.

Runs where the model runs (this venv, or the arch's image), like the training worker. LLaMA-Factory's chat
CLI is a REPL; a script wants one answer, so this asks LLaMA-Factory's own ChatModel (the engine behind
`llamafactory-cli chat` and `api`) once. Everything the libraries print while loading goes to stderr, at
the file-descriptor level, so stdout holds the answer alone.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.serve.ask")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then LLaMA-Factory's inference arguments")
    ns = parser.parse_args(argv)
    lf_args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args

    answer_fd = os.dup(1)
    os.dup2(2, 1)  # C extensions and loggers that hold sys.stdout write to stderr too
    try:
        from llamafactory.chat import ChatModel

        model = ChatModel(lf_args)
        responses = model.chat([{"role": "user", "content": ns.prompt}])
    finally:
        sys.stdout.flush()
        os.dup2(answer_fd, 1)
        os.close(answer_fd)
    text = responses[0].response_text if responses else ""
    print(text, flush=True)
    if not text.strip():
        print("[rocmft] the model's answer is empty: it ended its turn at once", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
