"""Progress events from inside the job: rank 0 appends one JSON line per logged step to `<run dir>/progress.jsonl`.

The launcher follows that file (rocmft.run.events), never the job's text: the Trainer's tqdm bar and its
printed log dicts are not in step with each other, so a scraper labels steps wrongly. Here the step IS the
Trainer's `state.global_step` at the moment it logs, the same number LLaMA-Factory writes to
trainer_log.jsonl.

Tokens/s: the Trainer's own count (`state.num_input_tokens_seen`, gathered over all ranks), switched on at
on_train_begin as "non_padding" unless something already asked for a count (the bench's metrics callback).
With `neat_packing` the attention mask is a 4-D float mask (0 where a token may attend, the dtype's minimum
elsewhere), whose sum is no token count: "all" then, padding included (about 8% of tiny-cpu's packed positions; `benchmarks/packing.py`
measures it for a recipe), as the bench does.
Peak memory at the end: allocated on the GPU, or the process's peak RSS on CPU, the maximum over ranks (a
collective, so every rank takes part in on_train_end; only rank 0 writes).

A preference or KTO run's steps also carry the stage's own figures (reward accuracy and margin, KL...: see
rocmft.recipe.stages), read from the same log entry as the loss.

Each line is appended with the file opened and closed around it: a reader on another machine (a Slurm
login node over NFS) sees whole lines as soon as they are written.
"""

from __future__ import annotations

import math
import os
import socket
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..recipe import stages
from ..run import events
from .metrics import GIB, cuda_in_use, local_peaks, max_over_ranks


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class ProgressCallback(TrainerCallback):
    def __init__(self, run_dir: Path | str, clock=time.time, tokens: str = "non_padding", stage: str = "sft"):
        self.path = events.path(run_dir)
        self.stage = stage
        self.clock = clock
        self.tokens = tokens  # the Trainer's include_num_input_tokens_seen: "non_padding", or "all" when packed
        self._began: float | None = None
        self._start_step = 0
        self._last: tuple[float, int] | None = None  # (time, tokens) at the previous logged step
        self._world = 1
        self._cuda = False

    def _write(self, state, event: dict[str, Any]) -> None:
        if not state.is_world_process_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(events.encode(event))

    def on_train_begin(self, args, state, control, **kwargs):
        if str(getattr(args, "include_num_input_tokens_seen", "no")) in ("no", "False"):
            args.include_num_input_tokens_seen = self.tokens  # read by the Trainer at every micro-batch
        self._cuda = cuda_in_use()
        self._began = self.clock()
        self._start_step = int(state.global_step or 0)
        self._world = int(getattr(args, "world_size", 1) or 1)
        self._last = (self._began, int(state.num_input_tokens_seen or 0))
        resumed = getattr(args, "resume_from_checkpoint", None)
        self._write(state, {"event": "begin", "time": self._began, "max_steps": int(state.max_steps or 0),
                            "start_step": self._start_step, "world_size": self._world,
                            "resumed_from": Path(resumed).name if resumed and self._start_step else None,
                            # which start of the run: the launcher's attempt (a Slurm requeue is the next
                            # one) and torchrun's restarts within it
                            "attempt": int(os.environ.get("ROCMFT_ATTEMPT") or 1),
                            "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0),
                            "host": socket.gethostname(), "stage": self.stage})

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs:
            return  # eval results and the Trainer's closing summary are not training steps
        now = self.clock()
        began = self._began if self._began is not None else now
        step = int(state.global_step)
        tokens = int(state.num_input_tokens_seen or 0)
        rate = None
        if self._last is not None and tokens > self._last[1] and now > self._last[0]:
            rate = (tokens - self._last[1]) / (now - self._last[0]) / max(1, self._world)
        self._last = (now, tokens)
        elapsed = now - began
        done = step - self._start_step
        max_steps = int(state.max_steps or 0)
        eta = elapsed / done * max(0, max_steps - step) if done > 0 else None
        self._write(state, {
            "event": "step", "time": now, "step": step, "max_steps": max_steps, "epoch": _number(state.epoch),
            "loss": _number(logs.get("loss")), "grad_norm": _number(logs.get("grad_norm")),
            "learning_rate": _number(logs.get("learning_rate")), "tokens_seen": tokens or None,
            "tokens_per_s_per_gpu": rate, "elapsed_s": elapsed, "eta_s": eta, **stages.signals(logs),
        })

    def on_train_end(self, args, state, control, **kwargs):
        allocated, _reserved, rss = local_peaks(self._cuda)
        (allocated, rss), scope = max_over_ranks([allocated, rss])
        now = self.clock()
        peak = allocated if self._cuda else rss
        self._write(state, {
            "event": "end", "time": now, "step": int(state.global_step), "max_steps": int(state.max_steps or 0),
            "elapsed_s": now - self._began if self._began is not None else None,
            "peak_memory_gib": peak / GIB if math.isfinite(peak) else None,
            "memory_kind": "gpu" if self._cuda else "rss", "memory_scope": scope,
        })


def eval_points(output_dir: Path | str) -> list[tuple[int, float]]:
    """(step, eval_loss) from LLaMA-Factory's trainer_log.jsonl: the held-out rows' loss at each eval."""
    import json

    points = []
    try:
        lines = (Path(output_dir) / "trainer_log.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        loss = entry.get("eval_loss") if isinstance(entry, dict) else None
        if isinstance(loss, (int, float)) and math.isfinite(loss) and "current_steps" in entry:
            points.append((int(entry["current_steps"]), float(loss)))
    return points


def plot_losses(run_dir: Path | str, output_dir: Path | str) -> Path | None:
    """`<output_dir>/training_loss.png` from the run's events, when they hold at least two finite losses,
    with the eval loss of the held-out rows (val_size) where the run logged one.

    Drawn here rather than by LLaMA-Factory's plot_loss, which also looks for eval metrics a train-only run
    never has and warns about each; this plot also exists for a run the watchdog stopped.
    """
    points = [(e["step"], e["loss"]) for e in events.steps(events.read(run_dir))
              if e.get("loss") is not None and math.isfinite(e["loss"])]
    if len(points) < 2:
        return None
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    steps, losses = zip(*points)
    smoothed, last = [], losses[0]
    weight = 1.8 * (1 / (1 + math.exp(-0.05 * len(losses))) - 0.5)  # LLaMA-Factory's smoothing: stronger for longer runs
    for value in losses:
        last = last * weight + (1 - weight) * value
        smoothed.append(last)
    figure = plt.figure()
    plt.plot(steps, losses, color="#1f77b4", alpha=0.4, label="original")
    plt.plot(steps, smoothed, color="#1f77b4", label="smoothed")
    held_out = eval_points(output_dir)
    if held_out:  # the rows val_size held out, evaluated every eval_steps
        plt.plot(*zip(*held_out), color="#ff7f0e", marker="o", label="eval loss (held-out rows)")
    plt.title(f"training loss of {Path(run_dir).name}")
    plt.xlabel("step")
    plt.ylabel("loss")
    plt.legend()
    target = Path(output_dir) / "training_loss.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    plt.savefig(target, format="png", dpi=100)
    plt.close(figure)
    return target
