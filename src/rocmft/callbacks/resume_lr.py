"""On RESUME, the run goes on with the learning rate schedule of the resumed run's own settings.

The Trainer restores the optimizer and scheduler state from the checkpoint, and with it two things that
belong to the old run:
- the base learning rate, so `RESUME=run SET=learning_rate=5e-5` would silently go on with the old rate -
  exactly what a user resuming a diverged run must not get;
- the learning rate the optimizer holds, the old schedule's value at the checkpoint's step. The scheduler
  keeps the new run's step count (its lambda is not saved), but it applies it only at its next step, so the
  first resumed step would train with the old value: 0 at the end of a cosine run extended with more
  max_steps (seen as `lr 0.0` on the first resumed step in trainer_log.jsonl).
on_train_begin runs after that restore: it sets the user's base and recomputes the rate at the current step
from the scheduler's own lambda (all of transformers' schedules are LambdaLR), as the scheduler's next step
would have.
"""

from __future__ import annotations

from transformers import TrainerCallback


class ResumeLearningRateCallback(TrainerCallback):
    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        if state.global_step == 0 or lr_scheduler is None or optimizer is None or not hasattr(lr_scheduler, "base_lrs"):
            return
        wanted = float(args.learning_rate)
        lambdas = getattr(lr_scheduler, "lr_lambdas", None)
        for i, base in enumerate(list(lr_scheduler.base_lrs)):
            group = optimizer.param_groups[i]
            changed = bool(base) and abs(base - wanted) > 1e-12 * max(base, wanted)
            if lambdas is not None:
                group["lr"] = wanted * lambdas[i](lr_scheduler.last_epoch)
            elif changed:  # a scheduler without a lambda: keep its position, change its scale
                group["lr"] = group["lr"] * wanted / base
            lr_scheduler.base_lrs[i] = wanted
            group["initial_lr"] = wanted
            if changed and i == 0 and state.is_world_process_zero:
                print(f"[rocmft] resumed with learning_rate {wanted:g} (checkpoint had {base:g})", flush=True)
        lr_scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]
