#!/usr/bin/env python3
"""`rocmft validate` of a plain LLaMA-Factory file: how long it takes, before and after (a benchmark to rerun).

Each run is `rocmft validate FILE --arch gfx942` in a fresh process, from a folder holding the file, its
dataset registry and its DeepSpeed JSON (the shape of LLaMA-Factory's examples/train_lora/qwen3_lora_sft.yaml,
and the same with ZeRO-3), N runs per setup, alternating. Four setups:

  code       REF's src/ (default: main, exported with git archive) | this checkout's
  bytecode   none: every module compiled from source on import, as happens in a venv uv installed without
             compiling when PYTHONDONTWRITEBYTECODE=1 (set on this machine and in CI; elsewhere Python writes
             the bytecode on the first import, so without it only the first run pays)
             | the venv's own (`make setup` compiles it at install time)

Printed: median wall and CPU seconds (user + sys of the child) per setup and file, and each setup's CPU
time as a ratio of REF without bytecode. Every check runs in every setup: the output is compared.
Run it alone (`rocmft-heavy`): the machine is shared, and wall time follows the load.

    .venv/bin/python benchmarks/validate_speed.py [--ref main] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXAMPLE = """\
### model
model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
trust_remote_code: true
### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
### dataset
dataset: identity,alpaca_en_demo
dataset_dir: {data}
template: qwen3_nothink
cutoff_len: 2048
max_samples: 1000
preprocessing_num_workers: 16
### output
output_dir: saves/qwen3-4b/lora/sft
logging_steps: 10
save_steps: 500
plot_loss: true
### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
"""
ZERO3 = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
         "gradient_clipping": "auto", "zero_allow_untested_optimizer": True, "bf16": {"enabled": "auto"},
         "zero_optimization": {"stage": 3, "overlap_comm": False, "contiguous_gradients": True,
                               "stage3_gather_16bit_weights_on_model_save": True}}


def workdir(tmp: Path) -> Path:
    folder = tmp / "files"
    (folder / "data").mkdir(parents=True)
    for name in ("identity", "alpaca_en_demo"):
        (folder / "data" / f"{name}.json").write_text("[]")
    (folder / "data" / "dataset_info.json").write_text(
        json.dumps({name: {"file_name": f"{name}.json"} for name in ("identity", "alpaca_en_demo")}))
    (folder / "ds_z3_config.json").write_text(json.dumps(ZERO3))
    # dataset_dir absolute: REF's code read a plain file's relative paths from the project, not from here
    example = EXAMPLE.format(data=folder / "data")
    (folder / "lora_sft.yaml").write_text(example)
    (folder / "lora_sft_ds3.yaml").write_text(example + "deepspeed: ds_z3_config.json\n")
    return folder


def export(ref: str, tmp: Path) -> Path:
    out = tmp / "ref"
    out.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def venv_has_bytecode() -> bool:
    site = Path(sysconfig.get_paths()["purelib"])
    return any((site / "llamafactory" / "hparams" / "__pycache__").glob("parser.*.pyc"))


def run_once(cwd: Path, file: str, env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rocmft.cli.main", "validate", file, "--arch", "gfx942"],
                          cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): validate {file}\n{proc.stdout}{proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default="main", help="the code to compare with (a git revision)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compiled = venv_has_bytecode()
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        files = workdir(tmp)
        empty_cache = tmp / "no-bytecode"  # Python looks for bytecode only here: there is none
        empty_cache.mkdir()
        base = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        base.pop("PYTHONPYCACHEPREFIX", None)
        no_bytecode = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(empty_cache)}
        ref_src = str(export(args.ref, tmp) / "src")
        setups = {
            f"{args.ref}, no bytecode": {**base, **no_bytecode, "PYTHONPATH": ref_src},
            "this checkout, no bytecode": {**base, **no_bytecode},
        }
        if compiled:
            setups[f"{args.ref}, venv bytecode"] = {**base, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": ref_src}
            setups["this checkout, venv bytecode"] = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        outputs: dict[str, set[str]] = {}
        for file in ("lora_sft.yaml", "lora_sft_ds3.yaml"):
            for _ in range(args.runs):
                for name, env in setups.items():
                    wall, cpu, out = run_once(files, file, env)
                    times.setdefault((name, file), []).append((wall, cpu))
                    outputs.setdefault(file, set()).add(out.splitlines()[-1])  # the verdict line
        print(f"rocmft validate FILE --arch gfx942, {args.runs} runs each (median), {os.cpu_count()} CPUs")
        for file in ("lora_sft.yaml", "lora_sft_ds3.yaml"):
            first = statistics.median(c for _, c in times[(next(iter(setups)), file)])
            print(f"\n{file}   (verdicts: {' | '.join(sorted(outputs[file]))})")
            for name in setups:
                walls, cpus = zip(*times[(name, file)])
                cpu = statistics.median(cpus)
                print(f"  {name:32s} wall {statistics.median(walls):6.2f} s   CPU {cpu:6.2f} s   "
                      f"CPU ratio {cpu / first:5.2f}")
        if not compiled:
            print("\nthis venv holds no compiled bytecode (set up before `make setup` compiled it): "
                  "run `make setup`, then this again for the bytecode rows")


if __name__ == "__main__":
    main()
