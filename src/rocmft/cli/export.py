"""`rocmft export RUN`: merge a run's LoRA adapter into its base model with `llamafactory-cli export`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ..io import hostio, paths
from ..io.problems import Problem, ProblemReport, raise_if_errors
from ..run import chain, pick, run_trust, runs

HELP = "merge a run's LoRA adapter into the base model (llamafactory-cli export) -> <run>/merged"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last`")


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
    run_dir, picked = pick.pick(args.run, key="RUN")
    for note in picked:  # which run `last` is, before anything is read from it
        print(note.line(), file=sys.stderr)
    run_path = runs.relative(run_dir)
    train = yaml.safe_load((run_dir / "train.yaml").read_text())
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
        tail = (hostio.read_text(run_dir / "export.log", hostio.LOG_LIMIT) or "").splitlines()[-15:]
        print("\n".join(tail), file=sys.stderr)
        print(f"[rocmft] export FAILED (exit code {proc.returncode}): {run_path}/export.log", file=sys.stderr)
        return proc.returncode
    print(f"[rocmft] merged model: {run_path}/merged", flush=True)
    return 0
