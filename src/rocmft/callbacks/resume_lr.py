"""On RESUME, the learning rate the user asked for wins over the one stored in the checkpoint.

The Trainer restores the optimizer and scheduler state from the checkpoint, including the old base
learning rate, so `RESUME=run SET=learning_rate=5e-5` would silently go on with the old rate - exactly
what a user resuming a diverged run must not get. on_train_begin runs after that restore.
"""

from __future__ import annotations

from transformers import TrainerCallback


class ResumeLearningRateCallback(TrainerCallback):
    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        if state.global_step == 0 or lr_scheduler is None or not hasattr(lr_scheduler, "base_lrs"):
            return
        wanted = float(args.learning_rate)
        for i, base in enumerate(list(lr_scheduler.base_lrs)):
            if base and abs(base - wanted) > 1e-12 * max(base, wanted):
                scale = wanted / base
                lr_scheduler.base_lrs[i] = wanted
                group = optimizer.param_groups[i]
                group["lr"] = group["lr"] * scale
                group["initial_lr"] = wanted
                lr_scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]
                if i == 0 and state.is_world_process_zero:
                    print(f"[rocmft] resumed with learning_rate {wanted:g} (checkpoint had {base:g})", flush=True)
