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
    Config("lora-neat-z3", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed=zero3"), "DeepSpeed ZeRO-3 on one process"),
    # why lora-neat-z3 measured 1.37x its planned memory: is Liger's fused loss in effect under ZeRO-3?
    Config("lora-neat-z3-noliger", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed=zero3", "enable_liger_kernel=false"),
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
    Config("lora-neat-z3-trace", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed=zero3", "env.ROCMFT_MEMORY_TRACE=1"),
           "lora-neat-z3 with the allocator history: what ZeRO-3 adds at the peak"),
)
# The next GPU run (issue 48, `--matrix next`, docs/bench.md): what settles the lean ZeRO-3 and the attention path.
# One process each, most important first (--deadline skips from the end). {ds} is the work dir's ds/ folder, where
# ds_variants() writes the shipped zero3 preset with one setting changed.
NEXT_MATRIX = (
    Config("lora-neat", "llama3-8b-lora", (), "the baseline: LoRA r16, neat packing, Liger, no DeepSpeed"),
    Config("z3-lean", "llama3-8b-z3", ("gpus_per_node=1",),
           "llama3-8b-z3 as shipped (zero3-replicated): within 10% of lora-neat, as planned?"),
    Config("z3-shipped", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed=zero3"),
           "the partitioned zero3 preset: the one-rank hook cost and memory excess again"),
    Config("z3-persist-only", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed={ds}/persist-only.json"),
           "zero3 with the base resident, the linear swap on: what the hooks cost without fetches"),
    Config("z3-swap-only", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed={ds}/swap-off.json"),
           "zero3 partitioned, memory_efficient_linear false: the linear swap's share of the memory excess"),
    Config("lora-packing-causal", "llama3-8b-lora", ("neat_packing=false", "packing=true"),
           "plain packing: SDPA's causal kernel, no 4D mask (a stand-in for flash-attn varlen)"),
    Config("lora-dropout0", "llama3-8b-lora", ("lora_dropout=0",), "no adapter dropout: a third off the adapters' inputs"),
    Config("lora-purebf16", "llama3-8b-lora", ("pure_bf16=true",), "16-bit adapters (no fp32 upcast, no autocast copies)"),
    Config("z3-shipped-trace", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed=zero3", "env.ROCMFT_MEMORY_TRACE=1"),
           "the ZeRO-3 memory snapshot: what is live at the peak, by library (its tokens/s are not the recipe's)"),
    Config("z3-granularity", "llama3-8b-z3", ("gpus_per_node=1", "deepspeed={ds}/granularity.json"),
           "stage3_module_granularity_threshold 1e7 (DeepSpeed#6649): crashed on CPU with PEFT LoRA; record what a GPU does"),
)
MATRICES = {"default": GPU_MATRIX, "next": NEXT_MATRIX}


def ds_variants(folder: Path) -> Path:
    """The shipped zero3 preset, rendered, with one setting changed per file (NEXT_MATRIX's {ds})."""
    from rocmft.recipe import render

    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads(render.environment().get_template("zero3.json.j2").render(bf16=True, fp16=False))
    for name, change in (("persist-only", {"stage3_param_persistence_threshold": 10**10}),
                         ("swap-off", {"memory_efficient_linear": False}),
                         ("granularity", {"stage3_module_granularity_threshold": 10**7})):
        cfg = json.loads(json.dumps(base))
        cfg["zero_optimization"].update(change)
        (folder / f"{name}.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return folder


def resolved(cfg: Config, work: Path) -> tuple[str, ...]:
    return tuple(o.replace("{ds}", str(work / "ds")) for o in cfg.overrides)


def rehearse(matrix: tuple[Config, ...], common: list[str], work: Path, log) -> bool:
    """The GPU matrix on this machine without a GPU: each configuration rendered (LLaMA-Factory's arguments, the
    DeepSpeed JSON, the rules) and planned as it would run. True when every one renders."""
    from rocmft import plan
    from rocmft.io.problems import ProblemReport
    from rocmft.plan import report
    from rocmft.recipe import recipes, render

    ds_variants(work / "ds")
    ok = True
    log(f"\n{len(matrix)} configurations a GPU run would measure ({', '.join(common)}):")
    for cfg in matrix:
        overrides = [*resolved(cfg, work), *common]
        try:
            recipe = recipes.load(cfg.recipe, overrides)
            render.render(recipe, "runs/rehearsal")
            result = plan.check(recipe, steps=6)
            tps = result.throughput.tokens_per_s_gpu if result.throughput else None
            log(f"  {cfg.name}: renders; planned {result.memory.peak_gib:.1f} GiB, {report.tokens_rate(tps)} tokens/s "
                f"({cfg.what})")
        except ProblemReport as exc:
            ok = False
            log(f"  {cfg.name}: DOES NOT RENDER: " + "; ".join(p.line() for p in exc.problems))
    return ok
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
    overrides = [*resolved(cfg, work), *common]
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
