"""Stops a diverging or collapsed run inside the training processes and leaves `diverged.json` with the evidence.

Diverged: the loss or gradient norm blew up. Collapsed: the network died quietly, which the Trainer would
report as a success: the gradient norm is exactly 0 while the learning rate is above 0 (nothing can learn
any more), or the loss sits at ln(vocab size), a uniform prediction, after it had been lower. Each must hold
for `grad_norm_patience` logged steps in a row.

Preference stages (`stage: dpo`, `kto`) have their own normal, read from the stage's signals (rocmft.recipe.stages):
- their loss starts at a known value (DPO: exactly ln 2 = 0.693 while the policy still equals the reference)
  and normally falls toward 0 on a learnable set, so a rise is measured against the FIRST logged loss, not
  the running minimum (a loss of 0.01 that bounces to 0.06 is healthy; one that climbs to 5 x ln 2 means the
  policy learns the reverse preference);
- a reward margin above `reward_margin_max` is an explosion: the policy has moved far past anything a
  preference between two answers asks for;
- a chosen log-probability that collapses: the policy's log-probability of the chosen answers more than
  `logp_collapse_factor` times the reference's (the same tokens of the same batch, so answer lengths cancel;
  for the reference-free ORPO and SimPO, its own first logged value) -- the known failure mode where DPO
  pushes both answers down and generation degrades.
A sigmoid DPO whose first logged loss is not ln 2 gets a warning (no stop): its reference is not the model
training starts from, e.g. a LoRA DPO that resumed an SFT adapter compares against the base without it.

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

from ..recipe import stages
from ..run.jobfiles import DIVERGED, job_file

DEFAULTS = {"grad_norm_max": 100.0, "grad_norm_patience": 3, "loss_rise_factor": 5.0, "min_steps": 3,
            "reward_margin_max": 50.0, "logp_collapse_factor": 4.0}
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
    reward_margin_max: float = DEFAULTS["reward_margin_max"]
    logp_collapse_factor: float = DEFAULTS["logp_collapse_factor"]

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> Thresholds:
        merged = {**DEFAULTS, **(settings or {})}
        return cls(float(merged["grad_norm_max"]), int(merged["grad_norm_patience"]),
                   float(merged["loss_rise_factor"]), int(merged["min_steps"]),
                   float(merged["reward_margin_max"]), float(merged["logp_collapse_factor"]))


@dataclass(frozen=True)
class Objective:
    """What the run optimises, as far as its normal depends on it (from the rendered train.yaml)."""

    stage: str = "sft"
    pref_loss: str = "sigmoid"
    pref_beta: float = 0.1
    starts_at_ln2: bool = False  # a sigmoid DPO whose first-step loss must be ln 2 (no extra terms, own reference)

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> Objective:
        stage = str(args.get("stage") or "sft")
        loss = str(args.get("pref_loss") or "sigmoid")
        extras = any(float(args.get(k) or 0) > 1e-6 for k in ("pref_ftx", "pref_bco_weight")) or \
            args.get("ld_alpha") is not None or args.get("ref_model")
        return cls(stage, loss, float(args.get("pref_beta") or 0.1),
                   starts_at_ln2=stage == "dpo" and loss == "sigmoid" and not extras)

    @property
    def preference(self) -> bool:
        return self.stage in ("dpo", "kto")

    @property
    def bounded_loss(self) -> bool:
        """A loss that starts at a known value and may fall toward 0 (ORPO's is an SFT loss plus a term)."""
        return self.preference and not (self.stage == "dpo" and self.pref_loss == "orpo")

    @property
    def reference_free(self) -> bool:
        return self.stage == "dpo" and self.pref_loss in stages.REFERENCE_FREE


class DivergenceDetector:
    """Pure logic, fed one log entry at a time; returns the cause when the run has diverged."""

    def __init__(self, thresholds: Thresholds, objective: Objective | None = None):
        self.t = thresholds
        self.o = objective or Objective()
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
        self.first_loss: float | None = None
        self.margins: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.chosen_ratios: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.margin_streak = 0
        self.chosen_streak = 0
        self.first_logp: float | None = None  # a reference-free loss's first chosen log-probability
        self.warnings: list[str] = []  # said once, not a stop (the callback prints them)

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
        if self.first_loss is None:
            self.first_loss = loss
            self._check_start(step, loss)
        if self.o.preference:  # their own normal; ORPO's loss (an SFT loss plus a term) then rises like SFT's
            cause = self._preference(step, loss, logs)
            if cause is not None or self.o.bounded_loss:
                return cause
        elif self.vocab_size and self.vocab_size > 1:
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

    # ------------------------------------------------------------ preference stages
    def _check_start(self, step: int, loss: float) -> None:
        if self.o.starts_at_ln2 and step == 1 and abs(loss - stages.LN2) > 0.01:
            self.warnings.append(
                f"DPO's first loss is {loss:.4f}, not ln 2 = 0.6931: the reference model is not the model training "
                "starts from (a LoRA DPO that resumed an SFT adapter compares against the base without it; "
                "FROM=<sft run> merges the adapter first)")

    def _preference(self, step: int, loss: float, logs: dict[str, Any]) -> str | None:
        t = self.t
        if self.o.bounded_loss and self.seen > t.min_steps and loss > t.loss_rise_factor * self.first_loss:
            return (f"loss rose to {loss:.4g} at step {step}, above {t.loss_rise_factor:g}x its first logged "
                    f"{self.first_loss:.4g}: the policy is learning the reverse of the preferences")
        margin = _finite(logs.get("rewards/margins"))
        if margin is not None:
            self.margins.append((step, margin))
            self.margin_streak = self.margin_streak + 1 if margin > t.reward_margin_max else 0
            if self.margin_streak >= t.grad_norm_patience:
                return (f"reward margin {margin:.4g} above {t.reward_margin_max:g} for {self.margin_streak} logged "
                        f"steps (step {step}): the policy has moved far past what the preferences ask")
        ratio = self._chosen_ratio(logs)
        if ratio is not None:
            self.chosen_ratios.append((step, ratio))
            self.chosen_streak = self.chosen_streak + 1 if ratio > t.logp_collapse_factor else 0
            if self.chosen_streak >= t.grad_norm_patience:
                basis = "its first logged value" if self.o.reference_free else "the reference model's"
                return (f"chosen log-probability collapsed: {ratio:.2f}x {basis} for {self.chosen_streak} logged "
                        f"steps (step {step}, limit {t.logp_collapse_factor:g}x): the preferred answers are being "
                        "unlearnt along with the rejected ones")
        return None

    def _chosen_ratio(self, logs: dict[str, Any]) -> float | None:
        """The policy's log-probability of the chosen answers over the reference's, on the same batch: the
        reference's is logps/chosen - rewards/chosen / beta (LLaMA-Factory's rewards are beta x the log-ratio)."""
        logp = _finite(logs.get("logps/chosen"))
        if logp is None:
            return None
        if self.o.reference_free:
            if self.first_logp is None:
                self.first_logp = logp
            reference = self.first_logp
        else:
            reward = _finite(logs.get("rewards/chosen"))
            if reward is None or self.o.pref_beta <= 0:
                return None
            reference = logp - reward / self.o.pref_beta
        return logp / reference if reference < -1e-6 else None


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class WatchdogCallback(TrainerCallback):
    def __init__(self, settings: dict[str, Any] | None, run_dir: Path, context: dict[str, Any],
                 objective: Objective | None = None):
        self.detector = DivergenceDetector(Thresholds.from_settings(settings), objective)
        self.run_dir = run_dir
        self.context = context  # precision, arch, recipe learning rate...: for the advice

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        config = getattr(model, "config", None)
        vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", None)
        self.detector.vocab_size = int(vocab) if vocab else None
        if self.detector.o.starts_at_ln2 and not state.global_step:
            args.logging_first_step = True  # the ln 2 check reads the loss of step 1, before any update


    def on_log(self, args, state, control, logs=None, **kwargs):
        d = self.detector
        cause = d.feed(state.global_step, logs or {})
        while d.warnings:
            warning = d.warnings.pop(0)
            if state.is_world_process_zero:
                print(f"[rocmft] warning: {warning}", flush=True)
        if cause is None:
            return
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
            "stage": d.o.stage,
            **({"pref_loss": d.o.pref_loss, "pref_beta": d.o.pref_beta,
                "reward_margin_tail": [list(x) for x in d.margins],
                "chosen_logp_ratio_tail": [list(x) for x in d.chosen_ratios]} if d.o.preference else {}),
            **self.context,
        }
        if state.is_world_process_zero:
            target = job_file(self.run_dir, DIVERGED)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{DIVERGED}.tmp")
            tmp.write_text(json.dumps(report, indent=2) + "\n")
            os.replace(tmp, target)
        raise Diverged(cause, report)
