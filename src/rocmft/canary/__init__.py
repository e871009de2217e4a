"""The numerics canary: before a long job, does this stack compute what it should?

The tiny model trains a few fixed steps twice, on the same batches and seed: once with the recipe's numerics
(precision, attention implementation, Liger, packing) and once with a reference (fp32, SDPA, no Liger, the
same packing). Per-step losses and gradient norms are compared against a tolerance built from the unit roundoff
of the recipe's precision (`tolerance`); a NaN or inf in the recipe's run is its own verdict. When they
disagree, one component at a time is set to the reference's (`bisection`) to name the one that restores
agreement and the SET= that applies it.

Pure data here (no torch, no processes): which runs, with what overrides, and what their numbers mean.
`rocmft.cli.canary` runs them through the same pipeline and runtimes as `make train`.

May import: io, hardware, recipe.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable

from ..hardware import arches
from ..recipe import precision, recipes

STEPS = 4  # a few optimizer steps: long enough for an update to reach the loss, short for CI's 2 cores
SEED = 42
# Unit roundoff u = 2^-p (p: significand bits with the implicit one): the largest relative error of one rounding.
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
# Two fp32 kernels that sum the same terms in another order (Liger's fused loss, another attention kernel) differ
# by up to n*u for n terms; the tiny model's longest sum is its 1,024-token softmax: 1024 * 2^-24 = 6.1e-5.
FP32_REORDER = 1024 * UNIT_ROUNDOFF["fp32"]
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class Numerics:
    precision: str  # fp32 | bf16 | fp16
    attention: str  # LLaMA-Factory's flash_attn: sdpa | fa2 | eager | auto
    liger: bool
    packing: str  # neat | plain | none: kept the same in both runs (the batches must be the same)

    def describe(self) -> str:
        return f"{self.precision}, {self.attention}, {'Liger' if self.liger else 'no Liger'}, packing {self.packing}"


def numerics_of(recipe: recipes.Recipe) -> Numerics:
    """The recipe's numerics as its render would set them (precision from the arch table for `auto`)."""
    arch = arches.get(recipe.arch, file=recipe.path)
    prec, _ = precision.resolve(recipe.precision, arch, recipe.path, use_cpu=not arch.is_gpu)
    args = recipe.llamafactory
    packing = "neat" if args.get("neat_packing") else "plain" if args.get("packing") else "none"
    return Numerics(prec.name, str(args.get("flash_attn") or arch.attention), args.get("enable_liger_kernel") is True,
                    packing)


def reference(numerics: Numerics) -> Numerics:
    return replace(numerics, precision="fp32", attention="sdpa", liger=False)


# One change at a time, cheapest suspect first: (component, field, reference value, the SET= that applies it).
BISECTION = (
    ("Liger", "liger", False, "enable_liger_kernel=false"),
    ("attention", "attention", "sdpa", "flash_attn=sdpa"),
    ("precision", "precision", "fp32", "precision=fp32"),
)


def bisection(numerics: Numerics) -> list[tuple[str, Numerics, str]]:
    """(component, the recipe's numerics with only that component set to the reference's, SET=) for each
    component that differs from the reference."""
    return [(name, replace(numerics, **{field: value}), set_text)
            for name, field, value, set_text in BISECTION if getattr(numerics, field) != value]


def model_for(numerics: Numerics, reference_of: Numerics | None = None) -> tuple[str, bool]:
    """(dtype the tiny model is rounded to, stored widened to fp32). The canary's model is stored in the dtype the
    recipe computes in, as Hub checkpoints are (Llama-3 and Qwen2.5 ship bf16) and as LLaMA-Factory 0.9.5 loads
    them (torch_dtype=auto keeps a checkpoint's dtype). An fp32 run compared with it (the reference, a bisection
    step) reads the same rounded weights widened to fp32 (exact), so both start from the same values."""
    target = reference_of or numerics
    dtype = DTYPES[target.precision]
    return dtype, numerics.precision == "fp32" and dtype != "float32"


def overrides(recipe: recipes.Recipe, numerics: Numerics, model: str, *, steps: int = STEPS) -> list[str]:
    """The recipe, reduced to a canary run of the tiny model with `numerics`: its learning rate, schedule, clipping,
    LoRA/full and packing kept; one process, no DeepSpeed, no saving, no eval, no watchdog (a NaN must be seen,
    not stopped), every step logged, NaN/inf losses logged as they are (the Trainer's filter would hide them)."""
    args = recipe.llamafactory
    arch = arches.get(recipe.arch, file=recipe.path)
    batch = min(int(args.get("per_device_train_batch_size") or 1), 4)
    items = [
        "gpus_per_node=1", "nodes=1", "deepspeed=none", "watchdog=false", "resilience.max_restarts=0",
        f"precision={numerics.precision}",
        f"llamafactory.model_name_or_path={model}", "llamafactory.template=llama3", "llamafactory.stage=sft",
        "llamafactory.dataset=demo_alpaca,demo_messages", "llamafactory.dataset_dir=data",
        "llamafactory.adapter_name_or_path=null", "llamafactory.quantization_bit=null",
        "llamafactory.cutoff_len=128", f"llamafactory.per_device_train_batch_size={batch}",
        "llamafactory.gradient_accumulation_steps=1", f"llamafactory.max_steps={steps}",
        "llamafactory.warmup_steps=0", "llamafactory.logging_steps=1", "llamafactory.logging_nan_inf_filter=false",
        "llamafactory.save_strategy='no'", "llamafactory.eval_strategy='no'", "llamafactory.val_size=0",
        "llamafactory.plot_loss=false", "llamafactory.report_to=none", "llamafactory.preprocessing_num_workers=1",
        "llamafactory.dataloader_num_workers=0", f"llamafactory.seed={args.get('seed', SEED)}",
        f"llamafactory.flash_attn={numerics.attention}",
        f"llamafactory.enable_liger_kernel={'true' if numerics.liger else 'false'}",
    ]
    if not arch.is_gpu:  # transformers runs bf16 on a CPU only with use_cpu (precision.resolve says what it costs)
        items.append(f"llamafactory.use_cpu={'true' if numerics.precision != 'fp32' else 'false'}")
    return items


def tolerance(precision_name: str, step: int) -> float:
    """Relative difference allowed at step `step` (1-based) between a run in `precision_name` and the fp32 reference.
    One rounding of each operand of a product costs up to 2u (u: the precision's unit roundoff); each step can add
    as much again through the weights it updated, so k steps allow 2ku. fp32 kernels that only sum in another
    order get FP32_REORDER per step."""
    return 2 * step * max(UNIT_ROUNDOFF[precision_name], FP32_REORDER)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


@dataclass(frozen=True)
class Comparison:
    verdict: str  # agrees | diverges | non-finite | failed
    steps: int
    worst: dict[str, Any]  # the step and quantity furthest past (or nearest to) its tolerance
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare(tested: list[dict[str, Any]], ref: list[dict[str, Any]], precision_name: str, steps: int) -> Comparison:
    """`tested`, `ref`: the runs' step events (step, loss, grad_norm). A run that logged fewer steps than asked
    failed; a NaN/inf in `tested` is non-finite; a relative difference past the tolerance diverges."""
    if len(ref) < steps:
        return Comparison("failed", len(ref), {}, f"the reference logged {len(ref)} of {steps} steps")
    if len(tested) < steps:
        return Comparison("failed", len(tested), {}, f"the recipe's numerics logged {len(tested)} of {steps} steps "
                                                     "where the reference logged all")
    worst: dict[str, Any] = {}
    for k, (a, b) in enumerate(zip(tested[:steps], ref[:steps]), start=1):
        for quantity in ("loss", "grad_norm"):
            x, y = a.get(quantity), b.get(quantity)
            if not _finite(x):
                return Comparison("non-finite", steps, {"step": k, "quantity": quantity, "value": _text(x),
                                                        "reference": _text(y)},
                                  f"{quantity} is {_text(x)} at step {k} (reference: {_text(y)})")
            if not _finite(y):
                return Comparison("failed", steps, {"step": k, "quantity": quantity},
                                  f"the reference's {quantity} is {_text(y)} at step {k}: no fp32 baseline to compare")
            rel, tol = _relative(x, y), tolerance(precision_name, k)
            if not worst or rel / tol > worst["ratio"]:
                worst = {"step": k, "quantity": quantity, "value": x, "reference": y, "relative": rel,
                         "tolerance": tol, "ratio": rel / tol}
    verdict = "diverges" if worst["ratio"] > 1 else "agrees"
    detail = (f"worst: {worst['quantity']} at step {worst['step']}, relative difference {worst['relative']:.2g} "
              f"against a tolerance of {worst['tolerance']:.2g}")
    return Comparison(verdict, steps, worst, detail)


def _text(value: Any) -> str:
    return "missing" if value is None else str(value)


def series(step_events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"step": e.get("step"), "loss": e.get("loss"), "grad_norm": e.get("grad_norm")} for e in step_events]


def json_safe(value: Any) -> Any:
    """NaN and inf as the strings "nan", "inf" (strict JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
