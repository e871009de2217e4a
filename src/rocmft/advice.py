"""What to change after a diverged run, ranked for the run's arch and settings (pure: report -> lines)."""

from __future__ import annotations

from typing import Any

from .arches import Arch


def rank(report: dict[str, Any], arch: Arch | None, run_name: str, checkpoint: str | None) -> list[str]:
    advice: list[str] = []
    precision = report.get("precision")
    lr = report.get("learning_rate") or report.get("recipe_learning_rate")
    resume = f"RESUME={run_name} " if checkpoint else ""
    if precision == "fp16":
        target = "bf16" if arch is not None and arch.bf16 else "fp32"
        why = "same memory, fp32's exponent range" if target == "bf16" else f"{arch.name if arch else 'this arch'} has no fast bf16"
        advice.append(f"switch precision fp16 -> {target} ({why}): make train {resume}SET=\"precision={target}\"")
    if lr and report.get("reason") == "collapsed":
        # A dead network does not come back by halving: the step that killed it was far too large.
        start = "from the last good checkpoint" if checkpoint else "from the start (no checkpoint before it)"
        advice.append(f"lower the learning rate tenfold ({lr:g} -> {lr / 10:g}) and train again {start}: "
                      f"make train {resume}SET=\"learning_rate={lr / 10:g}\"")
    elif lr:
        advice.append(f"halve the learning rate ({lr:g} -> {lr / 2:g}): make train {resume}SET=\"learning_rate={lr / 2:g}\"")
    if not report.get("max_grad_norm"):
        advice.append("enable gradient clipping: SET=\"max_grad_norm=1.0\"")
    step = report.get("step")
    if step is not None:
        per_step = (report.get("per_device_train_batch_size") or 1) * (report.get("gradient_accumulation_steps") or 1) \
            * (report.get("world_size") or 1)
        advice.append(f"check the data of step {step}: {per_step} rows per step, shuffled with seed {report.get('seed')}; "
                      "look for empty, huge or garbled rows (`make data IN=... NAME=...` reports them)")
    if precision == "bf16" and len(advice) < 3:
        advice.append("a warmup (warmup_steps: 0.05 or more) keeps early Adam steps small")
    return advice
