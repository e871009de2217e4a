"""The training stages as data: what each trains on, what it logs beyond the loss, and how a person reads it.

    stage  trains on (make data kind)   its own signals (LLaMA-Factory's log keys -> progress event keys)
    sft    supervised rows              -
    pt     plain text                   -
    dpo    preference pairs             rewards/accuracies, rewards/margins, rewards/chosen|rejected, logps/chosen|rejected
    kto    labelled answers (KTO)       kl, rewards/margins, rewards/chosen|rejected, logps/chosen|rejected

DPO's loss (`pref_loss: sigmoid`) is -log sigmoid(beta * margin of log-ratios): with the reference equal to the
policy it is exactly ln 2 at the first step. Its rewards are beta x (policy - reference) log-probabilities of
each answer; for ORPO and SimPO, which have no reference, beta x the policy's mean log-probability per token.
The reward accuracy is the share of pairs whose chosen answer out-scores the rejected one. KTO logs the KL
estimate its loss is centred on, and the mean rewards of the desirable and undesirable answers it saw.

Pure: read by the progress callback (inside the job), the terminal, the summary, `make runs` and the watchdog.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

KINDS = {"sft": "sft", "pt": "text", "dpo": "preference", "rm": "preference", "kto": "kto", "ppo": "sft"}
# The stage a recipe for a kind of data sets (the inverse of KINDS for the stages rocmft ships recipes for).
STAGE_OF_KIND = {"sft": "sft", "preference": "dpo", "kto": "kto", "text": "pt"}

# progress event key <- LLaMA-Factory's log key (data/train/dpo/trainer.py, train/kto/trainer.py)
SIGNALS = {
    "reward_accuracy": "rewards/accuracies",
    "reward_margin": "rewards/margins",
    "reward_chosen": "rewards/chosen",
    "reward_rejected": "rewards/rejected",
    "logp_chosen": "logps/chosen",
    "logp_rejected": "logps/rejected",
    "kl": "kl",
}
# What the live line shows of each stage (after the loss), and how.
SHOWN = {"dpo": ("reward_accuracy", "reward_margin"), "kto": ("kl", "reward_margin")}
LABELS = {"reward_accuracy": ("acc", "{:.2f}"), "reward_margin": ("margin", "{:+.3g}"), "kl": ("kl", "{:.3g}"),
          "logp_chosen": ("logp chosen", "{:.4g}")}
LN2 = math.log(2)
# Losses without a reference model: their rewards are the policy's own mean log-probabilities.
REFERENCE_FREE = ("orpo", "simpo")


def name(train_args: dict[str, Any]) -> str:
    return str(train_args.get("stage") or "sft")


def signals(logs: dict[str, Any]) -> dict[str, float]:
    """The stage's own figures in one Trainer log entry, under the progress event's keys."""
    found = {}
    for ours, theirs in SIGNALS.items():
        value = logs.get(theirs)
        if value is not None:
            try:
                found[ours] = float(value)
            except (TypeError, ValueError):
                continue
    return found


def fields(event: dict[str, Any], stage: str | None) -> list[str]:
    """The stage's figures of one step event as a person reads them: `acc 0.75  margin +0.412`."""
    out = []
    for key in SHOWN.get(stage or "", ()):
        value = event.get(key)
        if isinstance(value, (int, float)):
            label, form = LABELS[key]
            out.append(f"{label} {form.format(value)}")
    return out


def tail_mean(step_events: Iterable[dict[str, Any]], key: str, n: int = 3) -> float | None:
    """The mean of `key` over the last `n` logged steps that have it: one step's reward accuracy on a
    micro-batch of a few pairs is too coarse to read alone."""
    values = [e[key] for e in step_events if isinstance(e.get(key), (int, float)) and math.isfinite(e[key])]
    return sum(values[-n:]) / len(values[-n:]) if values else None


def first(step_events: Iterable[dict[str, Any]], key: str) -> float | None:
    return next((e[key] for e in step_events if isinstance(e.get(key), (int, float))), None)
