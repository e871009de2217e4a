"""How a run ended, said once for every runtime: status.json, the summary lines, the exit code."""

from __future__ import annotations

import itertools
import math
import os
import shlex
from pathlib import Path

from ..hardware import arches
from ..io import hostio, paths
from ..io.safe_text import for_terminal
from ..recipe import advice
from ..run import checkpoints, runs
from ..run.jobfiles import DIVERGED
from . import summary
from .joblog import failed_ranks

EXIT_DIVERGED = 3
EXIT_STOPPED = 75  # the worker's: stopped by a signal after saving a checkpoint (rocmft.worker)
EXIT_NOTHING_TRAINED = 1  # the job ended well without training a step: a failed run


def stopping_line(signame: str, grace_s: float) -> str:
    """What the launcher says on the first Ctrl-C/SIGTERM, in the name of the signal it got (the job gets the
    launcher's SIGTERM, and its own line about it stays in train.log)."""
    return (f"[rocmft] {signame}: the job finishes its optimizer step and saves a checkpoint (up to {grace_s:.0f} s; "
            "Ctrl-C again stops at once)")


def _first_bad_step(report: dict) -> int:
    """The first logged step that was already going wrong, judged without the watchdog's warm-up grace:
    a checkpoint from that step on holds diverging weights, even if the watchdog stopped the run later."""
    thresholds = report.get("thresholds")
    factor = thresholds.get("loss_rise_factor", math.inf) if isinstance(thresholds, dict) else math.inf
    factor = factor if isinstance(factor, (int, float)) else math.inf
    low = math.inf
    tail = report.get("loss_tail")
    for pair in tail if isinstance(tail, list) else []:
        try:
            step, loss = int(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError, KeyError, OverflowError):
            continue
        if not math.isfinite(loss) or loss > factor * low:
            return step
        low = min(low, loss)
    step = report.get("step")
    return step if isinstance(step, int) else 0


def _text(value, default: str) -> str:
    """A string field of the job's report, as one short line."""
    return " ".join(str(value).split())[:500] if isinstance(value, (str, int, float)) else default


def finish(run_dir: Path, code: int, arch_name: str) -> int:
    """Every line printed goes through `for_terminal`: it quotes what the job wrote in its run dir."""
    status = runs.read_status(run_dir)
    if status.get("state") == "interrupted":
        for line in stopped_lines(run_dir, status):
            print(for_terminal(line), flush=True)
        return code
    loss = runs.losses(run_dir)
    final = loss[-1][1] if loss else None
    diverged = runs.job_file(run_dir, DIVERGED)
    # the job wrote it: read as data (regular file, size cap, an object; its fields checked where used)
    present = os.path.lexists(diverged)
    report = hostio.read_json(diverged) if present else None
    if present and report is None:
        report = {"reason": "diverged", "cause": f"{runs.relative(diverged)} is not a readable JSON object"}
    if report is not None:
        first_bad = _first_bad_step(report)
        good = [c for c in runs.checkpoints(run_dir) if int(c.name.split("-")[1]) < first_bad
                and checkpoints.problem(c) is None]
        checkpoint = runs.relative(good[-1]) if good else None
        reason, cause = _text(report.get("reason"), "diverged"), _text(report.get("cause"), "?")
        runs.mark(run_dir, "diverged", exit_code=EXIT_DIVERGED, cause=cause, reason=reason,
                  final_loss=final, last_good_checkpoint=checkpoint)
        print(for_terminal(f"[rocmft] {str(reason).upper()}: {cause}"), flush=True)
        print(f"[rocmft] last good checkpoint: {checkpoint or 'none (no checkpoint before the divergence)'}", flush=True)
        again = train_command(run_dir, status, resume=checkpoint is not None)
        try:
            ranked = advice.rank(report, arches.table().get(arch_name), again, checkpoint)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            ranked = []  # a report whose fields are not the watchdog's types: no advice from it
        for i, line in enumerate(ranked, 1):
            print(for_terminal(f"[rocmft]   {i}. {line}"), flush=True)
        return EXIT_DIVERGED
    facts = summary.facts(run_dir)
    nothing = trained_nothing(run_dir) if code == 0 else None
    if nothing:  # the job ended well, but a run that trained no step never shows as succeeded
        runs.mark(run_dir, "failed", exit_code=0, reason=nothing, **{**facts, "final_loss": final})
        print(for_terminal(f"[rocmft] FAILED: {nothing}: {runs.relative(run_dir)}"), flush=True)
        return EXIT_NOTHING_TRAINED
    if code == 0:
        status = runs.mark(run_dir, "succeeded", exit_code=0, **{**facts, "final_loss": final})
        for line in summary.done_lines(run_dir, status) + attempt_lines(run_dir, status):
            print(for_terminal(line), flush=True)
        return 0
    log = hostio.read_text(run_dir / "train.log", hostio.LOG_LIMIT) or ""
    ranks = failed_ranks(log)
    runs.mark(run_dir, "failed", exit_code=code, failed_ranks=ranks, **{**facts, "final_loss": final})
    for line in summary.failed_lines(run_dir, code, log, ranks):
        print(for_terminal(line), flush=True)
    return code


def attempt_lines(run_dir: Path, status: dict) -> list[str]:
    """How often the run was started again (Slurm requeues, torchrun restarts) and what that cost in steps."""
    from ..run import events

    attempts = status.get("attempts") or []
    restarts = sum(int(a.get("restarts") or 0) for a in attempts)
    if len(attempts) < 2 and not restarts:
        return []
    parts = events.segments(events.read(run_dir))
    again = 0
    for before, after in itertools.pairwise(parts):
        reached = [int(e["step"]) for e in (*before["steps"], before["stop"], before["end"]) if e and e.get("step") is not None]
        again += max(0, max(reached, default=0) - int(after["begin"].get("start_step") or 0))
    how = "; ".join(f"{a['attempt']}: {a.get('how', '?')}" + (f" at step {a['step']}" if a.get("step") is not None else "")
                    + (f", {a['restarts']} restart(s)" if a.get("restarts") else "") for a in attempts)
    again_line = (f"[rocmft] restarts   {len(parts) - 1} start(s) after the first; {again} step(s) trained again "
                  "(done after the checkpoint each resumed from)")
    return [f"[rocmft] attempts   {len(attempts)} ({how})", again_line]


def stopped_lines(run_dir: Path, status: dict) -> list[str]:
    """What a stopped run saved and how to go on with it."""
    rel = runs.relative(run_dir)
    attempt = (status.get("attempts") or [{}])[-1]
    why = status.get("signal") or attempt.get("stopped_by") or status.get("reason") or "a stop"
    at = f" at step {attempt['step']}" if attempt.get("step") is not None else ""
    newest, _ = checkpoints.newest_complete(run_dir / "output")
    if attempt.get("checkpoint"):
        saved = f"{rel}/output/{attempt['checkpoint']} saved"
    else:
        saved = "no checkpoint saved" + (f" (the newest complete one: {runs.relative(newest)})" if newest else
                                         " (stopped before training, or killed before the save)")
    lines = [f"[rocmft] interrupted by {why}{at}: {saved}"]
    if newest is not None:
        lines.append(f"[rocmft] continue it: {train_command(run_dir, status, resume=True)}")
    return lines


def train_command(run_dir: Path, status: dict, *, resume: bool) -> str:
    """The whole `make train` line that trains this run again (RESUME=: on from its newest checkpoint, with its
    recipe as it was resolved, SET= included): its recipe, and the launch options that are no recipe key."""
    recipe = str(status.get("recipe") or "<recipe>")
    file = status.get("recipe_file")
    if isinstance(file, str) and file != runs.relative(paths.recipes_dir() / f"{recipe}.yaml"):
        recipe = file  # a recipe file outside recipes/ is named by its path
    words = [f"RECIPE={recipe}", *([f"RESUME={run_dir.name}"] if resume else [])]
    options = status.get("options")
    words += [f"{k}={v}" for k, v in (options.items() if isinstance(options, dict) else ())
              if isinstance(k, str) and k.isupper() and isinstance(v, str)]
    return "make train " + shlex.join(words)


def trained_nothing(run_dir: Path) -> str | None:
    """Why a job that ended well trained no step (its last start began where it ended), or None."""
    from ..run import events

    parts = events.segments(events.read(run_dir))
    end = parts[-1]["end"] if parts else None
    if not end or end.get("step") is None:
        return None  # no events to judge by (a job from before them)
    start = int(parts[0]["begin"].get("start_step") or 0)
    if int(end["step"]) > start:
        return None
    return f"trained no step (began at step {start}, max_steps {end.get('max_steps', '?')})"
