"""`rocmft export RUN`: merge a run's LoRA adapter into its base model with `llamafactory-cli export`;
`--format gguf`: then llama.cpp's converter writes the merged model as GGUF, an Ollama Modelfile beside it
(rocmft.publish.gguf)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ..io import hostio, paths
from ..io.problems import Problem, ProblemReport, raise_if_errors
from ..run import chain, run_trust, runs

HELP = ("merge a run's LoRA adapter into the base model (llamafactory-cli export) -> <run>/merged; "
        "--format gguf: + llama.cpp's GGUF and an Ollama Modelfile -> <run>/gguf-<outtype>")


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last`")
    parser.add_argument("--format", default="", help="gguf: convert the merged model with llama.cpp's converter")
    parser.add_argument("--outtype", default="", help="with --format gguf: f16 (default), bf16 or q8_0")


def export_config(train: dict, run_path: str) -> dict:
    """The export YAML: same model, template and dtype as training, adapter from the run, merged into the run dir."""
    return {
        "model_name_or_path": train["model_name_or_path"],
        # a run started FROM an earlier adapter (SFT, then DPO): that one is merged first, then the run's own
        "adapter_name_or_path": ",".join([*chain.upstream_adapters(train), f"{run_path}/output"]),
        "template": train.get("template", "default"),
        "finetuning_type": "lora",
        "trust_remote_code": bool(train.get("trust_remote_code", False)),
        "export_dir": f"{run_path}/merged",
        "export_size": 5,
        "export_device": "cpu",  # merging needs no GPU; it works the same on a laptop
        "export_legacy_format": False,
    }


def run(args) -> int:
    fmt = (args.format or "").strip().lower()
    if fmt:
        return _gguf(args, fmt)
    if args.outtype:
        raise ProblemReport([Problem("", "OUTTYPE", "is for FORMAT=gguf", "make export RUN=... FORMAT=gguf OUTTYPE=f16")])
    run_dir = runs.find(args.run)
    return merge(run_dir, yaml.safe_load((run_dir / "train.yaml").read_text()))


def _gguf(args, fmt: str) -> int:
    from ..publish import gguf, source

    if fmt not in gguf.FORMATS:
        raise ProblemReport([Problem("", "FORMAT", f"unknown `{fmt}`",
                                     f"{', '.join(gguf.FORMATS)}, or none for the merged safetensors")])
    plan = gguf.plan(source.load(args.run), args.outtype)
    run_dir, run_path, train = plan.run.run_dir, plan.run.run_path, plan.run.train
    if plan.merge_first:
        code = merge(run_dir, train)
        if code:
            return code
    print(f"[rocmft] llama.cpp's convert_hf_to_gguf: {runs.relative(plan.source)} -> {run_path}/gguf-{plan.outtype} "
          f"({plan.outtype})", flush=True)
    job = [sys.executable, "-m", "rocmft.publish.gguf_job", "--model", str(plan.source), "--outtype", plan.outtype,
           "--out", str(plan.out_dir), "--template", str(train.get("template", "default"))]
    if train.get("default_system"):
        job += ["--default-system", str(train["default_system"])]
    with hostio.open_append(run_dir / "export.log") as log:
        proc = subprocess.run(job, cwd=paths.root(), stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        return _failed(run_dir, proc.returncode)
    for line in (hostio.read_text(run_dir / "export.log", hostio.LOG_LIMIT) or "").splitlines():
        if line.startswith("[rocmft] note:"):  # the converter was told the tokenizer's split (gguf_job.py)
            print(line.removeprefix("[rocmft] "), file=sys.stderr)
    size = plan.gguf_file.stat().st_size / 2**20
    print(f"[rocmft] GGUF: {runs.relative(plan.gguf_file)} ({size:,.1f} MiB, {plan.outtype}); Ollama Modelfile beside it")
    print(f"[rocmft] run it in Ollama: {plan.ollama_line()}")
    if plan.outtype in ("f16", "bf16"):  # llama-quantize requantizes a q8_0 only with --allow-requantize, worse
        print(f"[rocmft] smaller k-quants need llama.cpp's llama-quantize, e.g.: {plan.quantize_line()}")
    return 0


def _failed(run_dir: Path, code: int) -> int:
    tail = (hostio.read_text(run_dir / "export.log", hostio.LOG_LIMIT) or "").splitlines()[-15:]
    print("\n".join(tail), file=sys.stderr)
    print(f"[rocmft] export FAILED (exit code {code}): {runs.relative(run_dir)}/export.log", file=sys.stderr)
    return code


def merge(run_dir: Path, train: dict) -> int:
    """The run's adapter(s) merged into its base model by `llamafactory-cli export` -> <run>/merged."""
    run_path = runs.relative(run_dir)
    if train.get("finetuning_type", "lora") != "lora":
        raise ProblemReport([Problem("", "RUN", f"{run_path} is a {train.get('finetuning_type')} fine-tune: "
                                     f"{run_path}/output already holds the full model, there is nothing to merge")])
    if not (run_dir / "output" / "adapter_model.safetensors").is_file():
        raise ProblemReport([Problem("", "RUN", f"{run_path}/output has no adapter (did the run finish?)", "see `make runs`")])
    if (run_dir / "merged").exists():
        raise ProblemReport([Problem("", "RUN", f"{run_path}/merged exists: not overwritten", "delete it to export again")])
    raise_if_errors(run_trust.remote_code_allowed(run_path, train, os.environ))
    for note in run_trust.foreign_notes(run_dir, "RUN"):
        print(note.line(), file=sys.stderr)
    if train.get("quantization_bit"):
        # LLaMA-Factory refuses to merge into a quantised model ("Cannot merge adapters to a quantized model."):
        # the adapter goes into the base as published, in the training dtype; export_config carries no
        # quantization_bit. Its answers match the 4-bit base's up to the 4-bit rounding the adapter trained on.
        print(f"[rocmft] {run_path} trained on a {train['quantization_bit']}-bit base: its adapter is merged into "
              f"the unquantised base {train['model_name_or_path']} (LLaMA-Factory merges no adapter into a "
              "quantised model)", flush=True)
    # host files of the run dir: written whole under a fresh name, never through a link a job left there
    hostio.write_text(run_dir / "export.yaml", yaml.safe_dump(export_config(train, run_path), sort_keys=False))
    cli = Path(sys.executable).with_name("llamafactory-cli")
    print(f"[rocmft] {cli.name} export {run_path}/export.yaml", flush=True)
    with hostio.open_append(run_dir / "export.log") as log:
        proc = subprocess.run([str(cli), "export", f"{run_path}/export.yaml"], cwd=paths.root(),
                              stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        return _failed(run_dir, proc.returncode)
    print(f"[rocmft] merged model: {run_path}/merged", flush=True)
    return 0
