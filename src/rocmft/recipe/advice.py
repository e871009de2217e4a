"""What to change after a diverged run, ranked for the run's arch and settings (pure: report -> lines)."""

from __future__ import annotations

from typing import Any

from ..hardware.arches import Arch


def rank(report: dict[str, Any], arch: Arch | None, again: str, checkpoint: str | None) -> list[str]:
    """`again`: the command that trains the run again (`make train RECIPE=... RESUME=...` from `checkpoint`, the
    last good one), each fix's SET= appended to it."""
    advice: list[str] = []
    precision = report.get("precision")
    lr = report.get("learning_rate") or report.get("recipe_learning_rate")
    again += " "
    if precision == "fp16":
        target = "bf16" if arch is not None and arch.bf16 else "fp32"
        why = "same memory, fp32's exponent range" if target == "bf16" else f"{arch.name if arch else 'this arch'} has no fast bf16"
        advice.append(f"switch precision fp16 -> {target} ({why}): {again}SET=\"precision={target}\"")
    advice += _preference(report, again)
    if lr and report.get("reason") == "collapsed":
        # A dead network does not come back by halving: the step that killed it was far too large.
        start = "from the last good checkpoint" if checkpoint else "from the start (no checkpoint before it)"
        advice.append(f"lower the learning rate tenfold ({lr:g} -> {lr / 10:g}) and train again {start}: "
                      f"{again}SET=\"learning_rate={lr / 10:g}\"")
    elif lr:
        advice.append(f"halve the learning rate ({lr:g} -> {lr / 2:g}): {again}SET=\"learning_rate={lr / 2:g}\"")
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


def _preference(report: dict[str, Any], again: str) -> list[str]:
    """A DPO/KTO run's own failure modes first (the watchdog's cause says which)."""
    if report.get("stage") not in ("dpo", "kto"):
        return []
    cause = str(report.get("cause", ""))
    beta = report.get("pref_beta") or 0.1
    closer = f"raise pref_beta ({beta:g} -> {beta * 2:g}) to keep the policy nearer the reference"
    if "chosen log-probability" in cause:
        return [f"add an SFT term that keeps the chosen answers likely, and {closer}: "
                f"{again}SET=\"pref_ftx=0.5 pref_beta={beta * 2:g}\""]
    if "reward margin" in cause:
        return [f"{closer}: {again}SET=\"pref_beta={beta * 2:g}\""]
    if "reverse" in cause:
        return ["check that `chosen` holds the preferred answer and `rejected` the other: swapped columns teach "
                "the reverse (`make data` shows each row's fields)"]
    return []
