"""Inside the job: what the sbatch script runs to record in <run>/status.json that an attempt started, and
how it ended (the node whose failure explains the job's exit code), as a local run would; after a stop on
Slurm's USR1 warning, the requeue.

Requeue rules (docs/multinode.md): only a stop on USR1 (the time-limit warning, or a preemption notice)
is requeued by the script; a SIGTERM is Slurm's own doing (preemption, scancel, the time limit itself) and
Slurm requeues a preempted job itself. Never a real error: a job that failed, or diverged (exit 3), without
such a stop. At most `resilience.max_requeues` times, counted by Slurm (SLURM_RESTART_COUNT), so an attempt
past it, however it was requeued, refuses to start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from ...recipe import recipes
from ...run import runs
from ...run.jobfiles import DIVERGED
from ..outcome import EXIT_DIVERGED, EXIT_STOPPED, stopped_lines

_SRUN_EXIT = re.compile(r"^srun: error: (\S+): tasks? ([\d,\-]+): Exited with exit code (\d+)", re.M)


def root_cause(log_text: str, code: int) -> tuple[int, list[str]]:
    """The exit code that explains a failed job, and which node gave it.

    With --kill-on-bad-exit, srun stops the healthy nodes when one fails and then returns the highest code
    of all tasks: often 143 (SIGTERM) of a node it stopped itself. The first task that EXITED non-zero on
    its own is the cause; its code is the one reported.
    """
    exits = [(node, task, int(c)) for node, task, c in _SRUN_EXIT.findall(log_text) if int(c) != 0]
    if not exits or code == 0:
        return code, []
    node, task, first = exits[0]
    lines = [f"node {node} (task {task}) exited with code {first}"]
    if code != first:
        lines.append(f"srun returned {code}: the other node(s) were stopped by --kill-on-bad-exit")
    return first, lines


def _finish(run_dir: Path, code: int, arch_name: str) -> int:
    from ..outcome import finish

    log = run_dir / "train.log"
    cause, lines = root_cause(log.read_text(errors="replace") if log.is_file() else "", code)
    for line in lines:
        print(f"[rocmft] {line}", flush=True)
    return finish(run_dir, cause, arch_name)


def _say(text: str) -> None:
    print(f"[rocmft] {text}", flush=True)


def started(run_dir: Path, attempt: int, max_requeues: int, job: dict) -> int:
    import socket

    runs.mark(run_dir, "running", attempt=attempt, runtime="slurm", host=socket.gethostname(), **job)
    if attempt - 1 > max_requeues:
        reason = (f"requeued {attempt - 1} times, more than resilience.max_requeues ({max_requeues}): "
                  "not started again")
        runs.mark(run_dir, "failed", exit_code=EXIT_STOPPED, reason=reason)
        _say(f"attempt {attempt}: {reason}")
        return EXIT_STOPPED
    if attempt > 1:
        _say(f"attempt {attempt} (requeue {attempt - 1} of at most {max_requeues}): it resumes from the newest "
             "complete checkpoint of this run")
    return 0


def ended(run_dir: Path, code: int, stop: str, attempt: int, max_requeues: int, arch: str) -> int:
    if code == 0 or code == EXIT_DIVERGED or runs.job_file(run_dir, DIVERGED).is_file() or stop not in ("USR1", "TERM"):
        return _finish(run_dir, code, arch)  # finished, or a real error (whatever else happened): never requeued
    if stop == "TERM":
        runs.mark(run_dir, "interrupted", exit_code=EXIT_STOPPED,
                  reason="SIGTERM from Slurm (preempted, cancelled or out of time)")
        for line in stopped_lines(run_dir, runs.read_status(run_dir)):
            print(line, flush=True)
        _say("a preempted job is requeued by Slurm itself (this job is requeueable); a cancelled one is not")
        return EXIT_STOPPED
    reason = "SIGUSR1 from Slurm (the time limit is near, or a preemption notice)"
    if attempt - 1 >= max_requeues:
        runs.mark(run_dir, "interrupted", exit_code=EXIT_STOPPED,
                  reason=f"{reason}; not requeued: requeued {attempt - 1} times already (resilience.max_requeues)")
        for line in stopped_lines(run_dir, runs.read_status(run_dir)):
            print(line, flush=True)
        return EXIT_STOPPED
    status = runs.mark(run_dir, "requeued", exit_code=code, reason=reason)
    done = status["attempts"][-1]
    saved = f"{done['checkpoint']} saved" if done.get("checkpoint") else "no checkpoint saved by the stop"
    _say(f"attempt {attempt} stopped at step {done.get('step', '?')} ({saved}); requeueing it "
         f"(requeue {attempt} of at most {max_requeues})")
    # scontrol requeue ends this job at once (SIGTERM to the batch step, this process included): the status
    # above is written first, and this process lives to say whether it worked.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    job_id = os.environ.get("SLURM_JOB_ID", "")
    try:
        proc = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60)
        error = "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        error = str(exc)
    if not error:
        return 0
    runs.mark(run_dir, "interrupted", exit_code=EXIT_STOPPED, reason=f"{reason}; `scontrol requeue {job_id}` failed: {error}")
    for line in stopped_lines(run_dir, runs.read_status(run_dir)):
        print(line, flush=True)
    return EXIT_STOPPED


def main(argv: list[str] | None = None) -> int:
    """`python -m rocmft.launch.slurm started RUN_DIR | ended RUN_DIR CODE [SIGNAL]`: what the sbatch script records."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rocmft.launch.slurm")
    parser.add_argument("event", choices=("started", "ended"))
    parser.add_argument("run_dir")
    parser.add_argument("code", nargs="?", type=int, default=0)
    parser.add_argument("signal", nargs="?", default="", help="the signal the script got from Slurm (USR1, TERM)")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    resolved = recipes.parse_yaml((run_dir / "recipe.resolved.yaml").read_text()) or {}
    max_requeues = int((resolved.get("resilience") or {}).get("max_requeues", recipes.RESILIENCE_DEFAULTS["max_requeues"]))
    attempt = int(os.environ.get("SLURM_RESTART_COUNT") or 0) + 1
    if args.event == "started":
        job = {"job_id": os.environ.get("SLURM_JOB_ID"), "nodelist": os.environ.get("SLURM_JOB_NODELIST")}
        return started(run_dir, attempt, max_requeues, job)
    return ended(run_dir, args.code, args.signal, attempt, max_requeues, str(resolved.get("arch", "cpu")))
