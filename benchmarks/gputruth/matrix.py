"""The configurations gpu_truth measures, and how one runs: an ordinary `rocmft bench` with its prediction."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ROOT


@dataclass(frozen=True)
class Config:
    name: str
    recipe: str
    overrides: tuple[str, ...]
    what: str


# What matters to the shipped recipes, each against the recipe as shipped (llama3-8b-lora: LoRA r16, neat
# packing 1 x 8192, Liger, no recompute). One process each; accumulation 1 so a step is one micro-batch.
GPU_MATRIX = (
    Config("lora-neat", "llama3-8b-lora", (), "LoRA r16, neat packing 1x8192, Liger, no recompute (the recipe)"),
    Config("lora-padded", "llama3-8b-lora",
           ("neat_packing=false", "packing=false", "cutoff_len=2048", "per_device_train_batch_size=4"),
           "padded rows: 4 per micro-batch, padded to the longest (the demo's lengths)"),
    Config("lora-neat-noliger", "llama3-8b-lora", ("enable_liger_kernel=false",), "Liger off: full logits"),
    Config("lora-neat-recompute", "llama3-8b-lora", ("disable_gradient_checkpointing=false",),
           "gradient checkpointing on"),
    Config("lora-neat-z3", "llama3-8b-z3", ("gpus_per_node=1",), "DeepSpeed ZeRO-3 on one process"),
    # why lora-neat-z3 measured 1.37x its planned memory: is Liger's fused loss in effect under ZeRO-3?
    Config("lora-neat-z3-noliger", "llama3-8b-z3", ("gpus_per_node=1", "enable_liger_kernel=false"),
           "ZeRO-3, Liger off: the memory lora-neat-z3 would have without Liger's fused loss"),
    # Liger named: the recipe no longer enables it (ZeRO-3 + a trainable lm_head, rocmft.recipe.rules); without ZeRO-3 it is safe
    Config("full-neat-purebf16", "llama3-8b-full-z3",
           ("gpus_per_node=1", "deepspeed=none", "pure_bf16=true", "enable_liger_kernel=true"),
           "full fine-tune, pure bf16 (no fp32 master), no DeepSpeed: the full point that fits one card"),
)
# Asked for by name only (--only): the allocator's history on (callbacks/memory_trace.py), which slows the steps,
# so their tokens/s are not the recipe's; metrics.json's memory_trace says what was live at the peak, by library.
TRACE_MATRIX = (
    Config("lora-neat-trace", "llama3-8b-lora", ("env.ROCMFT_MEMORY_TRACE=1",),
           "lora-neat with the allocator history: what is live at the peak"),
    Config("lora-neat-z3-trace", "llama3-8b-z3", ("gpus_per_node=1", "env.ROCMFT_MEMORY_TRACE=1"),
           "lora-neat-z3 with the allocator history: what ZeRO-3 adds at the peak"),
)
DRY_MATRIX = (
    Config("lora-neat", "tiny-cpu", (), "tiny-cpu as shipped (LoRA, neat packing)"),
    Config("lora-padded", "tiny-cpu", ("neat_packing=false", "packing=false"), "padded rows"),
)
COMMON = ("gradient_accumulation_steps=1", "val_size=0", "preprocessing_num_workers=1")

@dataclass
class Result:
    config: Config
    overrides: list[str]
    status: str = "not run"
    metrics: dict = field(default_factory=dict)
    prediction: object | None = None
    verdict: str = ""
    note: str = ""


def rocmft_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from rocmft.cli.main import main; sys.exit(main())", *args]


def run_config(cfg: Config, common: list[str], steps: int, work: Path, env: dict, timeout: int, log) -> Result:
    overrides = [*cfg.overrides, *common]
    res = Result(cfg, overrides)
    name = f"gpu_truth-{cfg.name}-{dt.datetime.now():%H%M%S}"
    argv = rocmft_argv("bench", cfg.recipe, *overrides, "--steps", str(steps), "--runtime", "local",
                       "--run-name", name, "--results", str(work / "bench.csv"), "--force", "--quiet")
    log(f"\n=== {cfg.name}: {cfg.what}\n$ rocmft bench {cfg.recipe} {shlex.join(overrides)} --steps {steps}")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        output, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), None
    log(output[-3000:] if code else "\n".join(output.splitlines()[-4:]))
    from rocmft.run.jobfiles import METRICS, job_file

    run_dir = Path(env.get("ROCMFT_RUNS") or ROOT / "runs") / name
    metrics = job_file(run_dir, METRICS)  # written by the job, in its own folder of the run dir
    if metrics.is_file():
        res.metrics = json.loads(metrics.read_text())
        res.status = "ok"
    else:
        res.status = "timeout" if code is None else f"failed ({code})"
        tail = [line for line in output.splitlines() if line.strip()][-1:] or [""]
        res.note = tail[0][:200]
        train_log = run_dir / "train.log"
        if train_log.is_file():
            log("--- train.log tail:\n" + "\n".join(train_log.read_text(errors="replace").splitlines()[-40:]))
    log(f"    {res.status} in {time.perf_counter() - t0:.0f} s")
    return res


def predict(res: Result, steps: int) -> None:
    from rocmft import bench, plan
    from rocmft.recipe import recipes

    res.prediction = bench.predict({"recipe": res.config.recipe, "overrides": shlex.join(res.overrides),
                                    "steps": str(steps)})
    try:
        res.verdict = plan.check(recipes.load(res.config.recipe, res.overrides), steps=steps).verdict
    except Exception as exc:  # noqa: BLE001 - a verdict the planner cannot give is a note, not a lost row
        res.verdict = f"unknown ({exc})"
