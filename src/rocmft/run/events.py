"""The progress events a run leaves in `<run dir>/output/progress.jsonl`, read back: followed live, summarized at the end.

Written by rank 0 of the job (rocmft.callbacks.progress, .stop), one JSON object per line:
  {"event": "begin", "time", "max_steps", "start_step", "world_size", "resumed_from", "attempt", "restart", "host",
   "stage"}
  {"event": "step", "time", "step", "max_steps", "epoch", "loss", "grad_norm", "learning_rate",
   "tokens_seen", "tokens_per_s_per_gpu", "elapsed_s", "eta_s"}          one per logged training step
     + for dpo/kto: "reward_accuracy", "reward_margin", "reward_chosen", "reward_rejected", "logp_chosen",
       "logp_rejected", "kl" (those the stage logs; rocmft.recipe.stages)
  {"event": "stop", "time", "step", "max_steps", "signal", "checkpoint"}  stopped by a signal, checkpoint saved
  {"event": "end", "time", "step", "max_steps", "elapsed_s", "peak_memory_gib", "memory_kind", "memory_scope"}
Non-finite numbers are written as the strings "nan", "inf", "-inf" (strict JSON readers stay happy).

One file per run, across every start of its processes: a torchrun restart or a Slurm requeue appends a new
"begin" whose start_step is the checkpoint it resumed from. The steps an earlier start logged after that
checkpoint were trained again: `steps()` keeps the later ones, so a loss curve has every step once.

Every runtime reads the same file: the run dir is on this machine (local), mounted at the same path in the
container (Docker), or on the filesystem the Slurm nodes share. The job wrote it, so the host reads it as data:
a regular file only, never through a link, at most hostio.LOG_LIMIT bytes. Pure: no torch, no transformers.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io import hostio
from ..recipe import stages
from .jobfiles import EVENTS as EVENTS_FILE
from .jobfiles import job_file

# The job's own lines about a signal it got (callbacks/stop.py) begin so: they stay in train.log for whoever reads
# the job's output, and the terminal leaves them out (launch/joblog.py): the launcher says how the run stops, in
# the name of the signal the user sent (a Ctrl-C reaches the job as the launcher's SIGTERM).
SIGNAL_LINE = "[rocmft] job: "
NUMBERS = ("loss", "grad_norm", "learning_rate", "epoch", "tokens_per_s_per_gpu", "elapsed_s", "eta_s",
           "peak_memory_gib", "time", *stages.SIGNALS)
INTEGERS = ("step", "max_steps", "start_step", "attempt", "restart", "world_size", "tokens_seen")


def path(run_dir: Path | str) -> Path:
    return job_file(run_dir, EVENTS_FILE)


def encode(event: dict[str, Any]) -> str:
    """One line of the file: non-finite floats as strings, so the line is strict JSON."""
    clean = {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in event.items()}
    return json.dumps(clean, separators=(",", ":")) + "\n"


def decode(line: str) -> dict[str, Any] | None:
    """One event, its fields of the types the readers use (None where the job wrote something else)."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None
    for key in NUMBERS:
        value = event.get(key)
        if isinstance(value, str):
            try:
                event[key] = float(value)
            except ValueError:
                event[key] = None
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            event[key] = None
    for key in INTEGERS:
        value = event.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            event[key] = None
    return event


class EventFile:
    """Follows the file: each `poll()` returns the events of the lines completed since the last one.

    Re-opened on every poll (cheap at a few polls a second): on NFS, close-to-open consistency is what makes a
    Slurm node's appends visible here; a half-written last line waits for its newline.
    """

    def __init__(self, run_dir: Path | str):
        self.path = path(run_dir)
        self.offset = 0
        self.pending = b""

    def poll(self) -> list[dict[str, Any]]:
        try:
            if os.path.getsize(self.path) <= self.offset:
                return []
        except OSError:
            return []
        data = hostio.read_bytes(self.path, hostio.LOG_LIMIT, self.offset)
        if not data:
            return []
        self.offset += len(data)
        data = self.pending + data
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        found = []
        for line in data[:cut].decode("utf-8", "replace").splitlines():
            event = decode(line)
            if event is not None:
                found.append(event)
        return found


def read(run_dir: Path | str) -> list[dict[str, Any]]:
    return EventFile(run_dir).poll()


def steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's logged steps, each once: a later start replaces what an earlier one logged after its checkpoint."""
    kept: list[dict[str, Any]] = []
    for e in events:
        if e.get("event") == "begin":
            start = int(e.get("start_step") or 0)
            kept = [s for s in kept if int(s.get("step") or 0) <= start]
        elif e.get("event") == "step":
            kept.append(e)
    return kept


def segments(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per start of the job's processes: its begin event, the steps it logged (as logged), and its
    stop or end event (None when it was killed before either)."""
    found: list[dict[str, Any]] = []
    for e in events:
        kind = e.get("event")
        if kind == "begin" or not found:
            found.append({"begin": e if kind == "begin" else {}, "steps": [], "stop": None, "end": None})
            if kind == "begin":
                continue
        if kind == "step":
            found[-1]["steps"].append(e)
        elif kind in ("stop", "end"):
            found[-1][kind] = e
    return found


@dataclass(frozen=True)
class Totals:
    """What the events say about a whole run (the summary and `make runs`)."""

    steps_logged: int
    last_step: int | None
    max_steps: int | None
    first_loss: tuple[int, float] | None
    last_loss: tuple[int, float] | None
    tokens_per_s_per_gpu: float | None
    peak_memory_gib: float | None
    memory_kind: str | None  # "gpu" (allocated on the device) or "rss" (CPU processes)
    memory_scope: str | None
    train_s: float | None
    stage: str | None = None
    # the stage's own figures: key -> (first logged value, mean of the last logged steps)
    signals: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)


def mean_rate(step_events: list[dict[str, Any]], world_size: int) -> float | None:
    """Tokens/s per GPU from the first logged step to the last (the first step's warm-up left out); with a
    single logged step, that step's own rate. Steps of several starts: each start's span counts (the clock
    and the warm-up restart with each)."""
    tokens = seconds = 0.0
    timed_all = []
    for part in _runs_of(step_events):
        timed = [e for e in part if isinstance(e.get("tokens_seen"), (int, float)) and e.get("elapsed_s") is not None]
        timed_all += timed
        if len(timed) >= 2:
            tokens += timed[-1]["tokens_seen"] - timed[0]["tokens_seen"]
            seconds += timed[-1]["elapsed_s"] - timed[0]["elapsed_s"]
    if tokens > 0 and seconds > 0:
        return tokens / seconds / max(1, world_size)
    if timed_all and timed_all[-1].get("tokens_per_s_per_gpu"):
        return float(timed_all[-1]["tokens_per_s_per_gpu"])
    return None


def _runs_of(step_events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive steps of one start: the elapsed clock only grows within one."""
    parts: list[list[dict[str, Any]]] = []
    for e in step_events:
        if not parts or (e.get("elapsed_s") or 0) < (parts[-1][-1].get("elapsed_s") or 0):
            parts.append([])
        parts[-1].append(e)
    return parts


def totals(events: list[dict[str, Any]]) -> Totals:
    step_events = steps(events)
    begin = next((e for e in reversed(events) if e.get("event") == "begin"), {})
    end = next((e for e in reversed(events) if e.get("event") == "end"), {})
    losses = [(int(e["step"]), float(e["loss"])) for e in step_events if e.get("loss") is not None]
    last = step_events[-1] if step_events else {}
    world = int(begin.get("world_size") or 1)
    elapsed = _training_seconds(segments(events))
    return Totals(
        steps_logged=len(step_events),
        last_step=end.get("step", last.get("step")),
        max_steps=end.get("max_steps", last.get("max_steps", begin.get("max_steps"))),
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        tokens_per_s_per_gpu=mean_rate(step_events, world),
        peak_memory_gib=end.get("peak_memory_gib"),
        memory_kind=end.get("memory_kind"),
        memory_scope=end.get("memory_scope"),
        train_s=float(elapsed) if elapsed is not None else None,
        stage=begin.get("stage"),
        signals={key: (stages.first(step_events, key), stages.tail_mean(step_events, key))
                 for key in stages.SIGNALS if any(key in e for e in step_events)},
    )


def _training_seconds(parts: list[dict[str, Any]]) -> float | None:
    """Time spent training, summed over every start of the job (the gaps between starts left out)."""
    total = None
    for part in parts:
        closing = part["end"] or part["stop"]
        if closing and closing.get("elapsed_s") is not None:
            seconds = closing["elapsed_s"]
        elif closing and part["begin"].get("time") and closing.get("time"):
            seconds = closing["time"] - part["begin"]["time"]
        elif part["steps"] and part["steps"][-1].get("elapsed_s") is not None:
            seconds = part["steps"][-1]["elapsed_s"]
        else:
            continue
        total = (total or 0.0) + float(seconds)
    return total


def clock(seconds: float | None) -> str:
    """0:03:07 style (what a person reads for an ETA or a duration)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def step_fields(event: dict[str, Any], *, brief: bool = False, eta_s: float | None = None,
                stage: str | None = None) -> list[str]:
    """A step's figures as a person reads them; `brief` (the live line) leaves out grad norm and lr, `eta_s`
    replaces the event's ETA (the live line counts it down between events); a `stage` with signals of its
    own (dpo: reward accuracy and margin, kto: KL and margin) shows them after the loss."""
    parts = []
    if event.get("loss") is not None:
        parts.append(f"loss {event['loss']:.4f}")
    parts += stages.fields(event, stage)
    if not brief and event.get("grad_norm") is not None:
        parts.append(f"grad_norm {event['grad_norm']:.3g}")
    if not brief and event.get("learning_rate") is not None:
        parts.append(f"lr {event['learning_rate']:.3g}")
    if event.get("tokens_per_s_per_gpu"):
        parts.append(f"{event['tokens_per_s_per_gpu']:,.0f} tok/s/GPU")
    eta = event.get("eta_s") if eta_s is None else eta_s
    if eta is not None:
        parts.append(f"ETA {clock(eta)}")
    return parts


def step_line(event: dict[str, Any], stage: str | None = None) -> str:
    """One logged step as a person reads it: `step 3/12  loss 6.7091  1,234 tok/s/GPU  ETA 0:00:02`."""
    return "  ".join([f"step {event.get('step', '?')}/{event.get('max_steps', '?')}", *step_fields(event, stage=stage)])
