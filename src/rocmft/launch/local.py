"""RUNTIME=local: the plan as a process group on this machine (how CI trains for real on CPU).

The job's output goes to <run dir>/train.log in full; the terminal shows its progress events and the
project's lines (progress.Watch), or everything with `verbose`. Ctrl-C or SIGTERM stops the whole process
group (torchrun and every rank: no orphans) and the run is marked interrupted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .. import paths, runs
from .plan import LaunchPlan, job_env
from .progress import Watch

GRACE_S = 10


def run(plan: LaunchPlan, run_dir: Path, *, quiet: bool = False, verbose: bool = False) -> int:
    env = job_env(plan, os.environ)
    log_path = run_dir / "train.log"
    runs.mark(run_dir, "running", runtime="local", launcher_pid=os.getpid(), host=socket.gethostname())
    interrupted: list[int] = []

    proc = subprocess.Popen(plan.argv, cwd=paths.root(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(signum, _frame):
        interrupted.append(signum)
        _terminate(proc)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with open(log_path, "ab") as log, Watch(run_dir, sys.stdout, quiet=quiet, verbose=verbose) as watch:
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                log.write(chunk)
                log.flush()
                watch.feed(chunk)
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            _terminate(proc)
    if interrupted:
        runs.mark(run_dir, "interrupted", exit_code=128 + interrupted[0], signal=signal.Signals(interrupted[0]).name)
        return 128 + interrupted[0]
    return code


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM the job's process group, then SIGKILL what is left after the grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # ranks that outlived torchrun, if any
    except ProcessLookupError:
        pass


def launch(prep, args) -> int:
    """`rocmft train --runtime local`: commit the run dir, record the plan, run it, say how it ended."""
    from .. import pipeline
    from .outcome import finish

    plan = pipeline.build_plan(prep)
    run_dir = pipeline.commit(prep, plan, runtime="local")
    print(f"[rocmft] run dir: {runs.relative(run_dir)}", flush=True)
    print(f"[rocmft] command: {' '.join(plan.argv)}", flush=True)
    code = run(plan, run_dir, quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False))
    return finish(run_dir, code, prep.recipe.arch)
