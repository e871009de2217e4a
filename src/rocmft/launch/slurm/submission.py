"""Handing the script to Slurm: `sbatch --test-only` first, then `sbatch`, and with --wait, train.log
followed on the terminal until the job ends, Ctrl-C/SIGTERM cancelling it (scancel).

A requeued job keeps its id, its run dir and its train.log (appended): `sbatch --wait` waits through the
requeues, and the follower shows every attempt's steps until the last one's summary."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ...io.problems import Problem, ProblemReport
from ...run import runs
from .status import _finish


def slurm_verdict(script: str, root: Path) -> None:
    """`sbatch --test-only`: Slurm's own verdict on partition, account, limits, shown verbatim, before any run dir."""
    try:
        proc = subprocess.run(["sbatch", "--test-only"], input=script, text=True, capture_output=True, cwd=root,
                              timeout=60, check=False)
    except subprocess.TimeoutExpired:
        print("warning: sbatch --test-only did not answer within 60 s; submitting without Slurm's pre-check",
              file=sys.stderr, flush=True)
        return
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip() or f"sbatch --test-only exited {proc.returncode}"
        raise ProblemReport([Problem("", "sbatch", f"Slurm refused the job: {message}",
                                     "check PARTITION= / ACCOUNT= / TIME= against `sinfo` and `sacctmgr show assoc user=$USER`")])


def _follow(run_dir: Path, stop: threading.Event, out, *, verbose: bool = False) -> None:
    """Show the job's progress events and its `[rocmft]` lines (all of train.log with `verbose`) until `stop`
    is set and the log is drained. Both files are in the run dir the nodes share."""
    from ..progress import Watch

    path = run_dir / "train.log"
    handle = None
    with Watch(run_dir, out, verbose=verbose) as watch:
        while True:
            if handle is None and path.is_file():
                handle = open(path, "rb")  # noqa: SIM115 - closed below
            chunk = handle.read(65536) if handle else b""
            if chunk:
                watch.feed(chunk)
                continue
            if stop.is_set():
                break
            time.sleep(0.3)
    if handle:
        handle.close()


def _queued(job_id: str) -> bool:
    try:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def _wait_while_requeued(run_dir: Path, job_id: str, poll_s: float = 5.0) -> None:
    """Should `sbatch --wait` return between two attempts, wait for the next one as long as Slurm holds the job."""
    while runs.read_status(run_dir).get("state") in ("requeued", "running") and _queued(job_id):
        time.sleep(poll_s)


def submit(script_path: Path, run_dir: Path, arch_name: str, root: Path, *, wait: bool, verbose: bool = False) -> int:
    cmd = ["sbatch", "--parsable"] + (["--wait"] if wait else []) + [str(script_path)]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip()
    job_id = first.split(";")[0] if first[:1].isdigit() else None
    if job_id is None:
        _, err = proc.communicate()
        message = (err or first).strip() or f"sbatch exited {proc.returncode}"
        runs.mark(run_dir, "failed", runtime="slurm", exit_code=proc.returncode or 1, error=message)
        raise ProblemReport([Problem("", "sbatch", f"Slurm refused the job: {message}",
                                     f"the script is in {runs.relative(script_path)}; fix and `sbatch` it, or run again")])
    # status.json is the job's to write from here on (it records its id when it starts): writing it here too
    # could race with a job that starts at once.
    rel = runs.relative(run_dir)
    print(f"[rocmft] submitted slurm job {job_id}: {rel}", flush=True)
    print(f"[rocmft] follow: tail -f {rel}/train.log   status: squeue -j {job_id}   cancel: scancel {job_id}", flush=True)
    if not wait:
        proc.stdout.close()
        proc.wait()
        print(f"[rocmft] when it ends, {rel}/status.json and `make runs` say how (the job records it itself)", flush=True)
        return 0

    stop = threading.Event()
    follower = threading.Thread(target=_follow, args=(run_dir, stop, sys.stdout), kwargs={"verbose": verbose},
                                daemon=True)
    follower.start()
    interrupted: list[int] = []

    def cancel(signum, _frame):
        interrupted.append(signum)
        print(f"\n[rocmft] cancelling slurm job {job_id}", flush=True)
        subprocess.run(["scancel", job_id], check=False)

    previous = {s: signal.signal(s, cancel) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _, err = proc.communicate()
        _wait_while_requeued(run_dir, job_id)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        stop.set()
        follower.join(timeout=10)
    code = proc.returncode
    if err.strip():
        print(err.strip(), file=sys.stderr, flush=True)
    if interrupted:
        runs.mark(run_dir, "interrupted", exit_code=128 + interrupted[0], job_id=job_id)
        print(f"[rocmft] interrupted: slurm job {job_id} cancelled, {rel} marked interrupted", flush=True)
        return 128 + interrupted[0]
    status = runs.read_status(run_dir)
    if status.get("state") in ("succeeded", "failed", "diverged", "interrupted") and status.get("job_id") == job_id:
        return int(status.get("exit_code", code))  # the job recorded how it ended (and printed it into train.log)
    return _finish(run_dir, code, arch_name)  # killed before it could record (time limit, scancel, node failure)
