"""Stops a diverging or collapsed run inside the training processes and leaves `diverged.json` with the evidence.

Diverged: the loss or gradient norm blew up. Collapsed: the network died quietly, which the Trainer would
report as a success: the gradient norm is exactly 0 while the learning rate is above 0 (nothing can learn
any more), or the loss sits at ln(vocab size), a uniform prediction, after it had been lower. Each must hold
for `grad_norm_patience` logged steps in a row.

Every rank sees the same logged loss and grad norm (the Trainer reduces them before logging), so every
rank raises at the same step: no rank is left waiting in a collective. Raising (rather than asking the
Trainer to stop) also skips the final save, so the diverged weights never overwrite anything; the
checkpoints written before the divergence stay as they were.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

DEFAULTS = {"grad_norm_max": 100.0, "grad_norm_patience": 3, "loss_rise_factor": 5.0, "min_steps": 3}
TAIL = 20
# A loss within this fraction of ln(vocab) is "at" the uniform prediction (6.7056 +- 0.013 for 816 tokens).
UNIFORM_TOLERANCE = 0.002


class Diverged(RuntimeError):
    def __init__(self, cause: str, report: dict[str, Any]):
        super().__init__(cause)
        self.cause = cause
        self.report = report


@dataclass
class Thresholds:
    grad_norm_max: float
    grad_norm_patience: int
    loss_rise_factor: float
    min_steps: int

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> Thresholds:
        merged = {**DEFAULTS, **(settings or {})}
        return cls(float(merged["grad_norm_max"]), int(merged["grad_norm_patience"]),
                   float(merged["loss_rise_factor"]), int(merged["min_steps"]))


class DivergenceDetector:
    """Pure logic, fed one log entry at a time; returns the cause when the run has diverged."""

    def __init__(self, thresholds: Thresholds):
        self.t = thresholds
        self.losses: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.grad_norms: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.learning_rates: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.min_loss = math.inf
        self.seen = 0
        self.high_norm_streak = 0
        self.zero_norm_streak = 0
        self.uniform_streak = 0
        self.vocab_size: int | None = None  # set when the model is known (on_train_begin)
        self.reason = "diverged"  # or "collapsed", once feed() returned a cause

    def _collapsed(self, cause: str) -> str:
        self.reason = "collapsed"
        return cause

    def feed(self, step: int, logs: dict[str, Any]) -> str | None:
        loss, norm, lr = logs.get("loss"), logs.get("grad_norm"), logs.get("learning_rate")
        if lr is not None:
            self.learning_rates.append((step, float(lr)))
        if norm is not None:
            norm = float(norm)
            self.grad_norms.append((step, norm))
            if not math.isfinite(norm):
                return f"gradient norm became {norm} at step {step}"
            self.high_norm_streak = self.high_norm_streak + 1 if norm > self.t.grad_norm_max else 0
            if self.high_norm_streak >= self.t.grad_norm_patience:
                return (f"gradient norm above {self.t.grad_norm_max:g} for {self.high_norm_streak} logged steps "
                        f"(now {norm:.3g} at step {step})")
            learning = lr is None or float(lr) > 0
            self.zero_norm_streak = self.zero_norm_streak + 1 if norm == 0.0 and learning else 0
            if self.zero_norm_streak >= self.t.grad_norm_patience:
                return self._collapsed(f"gradient norm exactly 0 for {self.zero_norm_streak} logged steps "
                                       f"with the learning rate above 0 (step {step}): the network no longer learns")
        if loss is None:
            return None
        loss = float(loss)
        self.losses.append((step, loss))
        if not math.isfinite(loss):
            return f"loss became {loss} at step {step}"
        self.seen += 1
        if self.vocab_size and self.vocab_size > 1:
            uniform = math.log(self.vocab_size)
            tolerance = UNIFORM_TOLERANCE * uniform
            pinned = abs(loss - uniform) <= tolerance and self.min_loss < uniform - tolerance
            self.uniform_streak = self.uniform_streak + 1 if pinned else 0
            if self.uniform_streak >= self.t.grad_norm_patience:
                return self._collapsed(f"loss pinned at {loss:.4f} = ln({self.vocab_size}), a uniform "
                                       f"prediction, for {self.uniform_streak} logged steps after it had been "
                                       f"{self.min_loss:.4f} (step {step})")
        if self.seen > self.t.min_steps and loss > self.t.loss_rise_factor * self.min_loss:
            return (f"loss rose to {loss:.4g} at step {step}, above {self.t.loss_rise_factor:g}x its "
                    f"running minimum {self.min_loss:.4g}")
        self.min_loss = min(self.min_loss, loss)
        return None


class WatchdogCallback(TrainerCallback):
    def __init__(self, settings: dict[str, Any] | None, run_dir: Path, context: dict[str, Any]):
        self.detector = DivergenceDetector(Thresholds.from_settings(settings))
        self.run_dir = run_dir
        self.context = context  # precision, arch, recipe learning rate...: for the advice

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        config = getattr(model, "config", None)
        vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", None)
        self.detector.vocab_size = int(vocab) if vocab else None

    def on_log(self, args, state, control, logs=None, **kwargs):
        cause = self.detector.feed(state.global_step, logs or {})
        if cause is None:
            return
        d = self.detector
        report = {
            "reason": d.reason,
            "cause": cause,
            "vocab_size": d.vocab_size,
            "step": state.global_step,
            "loss_tail": [list(x) for x in d.losses],
            "grad_norm_tail": [list(x) for x in d.grad_norms],
            "learning_rate_tail": [list(x) for x in d.learning_rates],
            "learning_rate": args.learning_rate,
            "max_grad_norm": args.max_grad_norm,
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "world_size": args.world_size,
            "seed": args.seed,
            "thresholds": vars(d.t),
            **self.context,
        }
        if state.is_world_process_zero:
            tmp = self.run_dir / "diverged.json.tmp"
            tmp.write_text(json.dumps(report, indent=2) + "\n")
            os.replace(tmp, self.run_dir / "diverged.json")
        raise Diverged(cause, report)
