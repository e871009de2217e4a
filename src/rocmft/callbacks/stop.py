"""A stop saves first: on a signal the ranks finish the optimizer step, save a checkpoint and exit, resumable.

SIGTERM (the launcher's Ctrl-C, `docker stop`, Slurm preempting or cancelling), SIGUSR1 (Slurm's warning
before the time limit, passed on by the sbatch script, srun and torchrun) and SIGINT only set a flag here.
At the end of every optimizer step all ranks agree whether any of them got one: an all_reduce of one
number, because the ranks of a multi-node job receive the signal at different moments and a DeepSpeed save
is collective, so every rank must stop at the same step. The Trainer then saves that step's checkpoint
(`control.should_save`); when every rank is past the save (a barrier: with plain DDP rank 0 writes alone and
the others must not exit under it), `Stopped` is raised from on_save, which skips LLaMA-Factory's closing work
(the "final" model in output/ would be a half-trained one). The worker exits with EXIT_STOPPED.

The agreement costs one tiny collective per optimizer step. The Trainer already does more: with the token
count the progress callback switches on, it gathers and `.item()`s once per micro-batch
(transformers Trainer._track_num_input_tokens).

The handlers are installed at on_train_begin: a signal during model loading or preprocessing, with nothing to
save yet, ends the process at once as before. A second signal during the save changes nothing here: the
save goes on (a launcher that wants to stop at once, on a second Ctrl-C, sends SIGKILL). On the last step the
run simply finishes: its final save is the checkpoint.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from transformers import TrainerCallback

from ..run import events

SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


class Stopped(Exception):
    def __init__(self, signame: str, step: int, checkpoint: str):
        super().__init__(f"{signame}: stopped at step {step}, {checkpoint} saved")
        self.signame, self.step, self.checkpoint = signame, step, checkpoint


def _rank0(state) -> bool:
    return bool(getattr(state, "is_world_process_zero", True))


class StopOnSignalCallback(TrainerCallback):
    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self.received: str | None = None  # the first signal's name
        self.stop_at: int | None = None
        self._zero = True

    def _on_signal(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if self.received is None:
            self.received = name
            if self._zero:
                print(f"{events.SIGNAL_LINE}{name}: finishing this optimizer step, then saving a checkpoint", flush=True)
        elif self._zero:
            print(f"{events.SIGNAL_LINE}{name} again: still stopping; the checkpoint is being written", flush=True)

    def on_train_begin(self, args, state, control, **kwargs):
        self._zero = _rank0(state)
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal)

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_at is None and _any_rank(self.received is not None) and state.global_step < state.max_steps:
            self.stop_at = state.global_step
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        if self.stop_at is None or state.global_step != self.stop_at:
            return
        _barrier()
        checkpoint = f"checkpoint-{state.global_step}"
        signame = self.received or "a signal on another rank"
        if _rank0(state):
            target = events.path(self.run_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(events.encode({"event": "stop", "time": time.time(), "step": int(state.global_step),
                                        "max_steps": int(state.max_steps or 0), "signal": signame,
                                        "checkpoint": checkpoint}))
            print(f"{events.SIGNAL_LINE}stopped by {signame} at step {state.global_step}/{state.max_steps}: "
                  f"{Path(args.output_dir) / checkpoint} saved", flush=True)
        raise Stopped(signame, int(state.global_step), checkpoint)


def _distributed():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 else None


def _any_rank(flag: bool) -> bool:
    """True on every rank when any rank's flag is (every rank must call this: it is a collective)."""
    dist = _distributed()
    if dist is None:
        return flag
    import torch

    device = "cpu"
    if dist.get_backend() == "nccl" and torch.cuda.is_available():  # RCCL on ROCm: a device tensor
        device = f"cuda:{torch.cuda.current_device()}"
    tensor = torch.tensor([int(flag)], dtype=torch.int32, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())


def _barrier() -> None:
    dist = _distributed()
    if dist is not None:
        dist.barrier()
