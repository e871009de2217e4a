"""RUNTIME=local: the plan as a process group on this machine (how CI trains for real on CPU).

The job's output goes to <run dir>/train.log in full; the terminal shows its progress events and the
project's lines (progress.Watch), or everything with `verbose`.

A stop saves first: Ctrl-C or SIGTERM sends SIGTERM to the job's first process (torchrun, which passes it to
every rank, or the only process), which finishes its optimizer step and saves a checkpoint
(callbacks/stop.py); the run is marked interrupted with that checkpoint. The job gets the recipe's
`resilience.stop_grace_s` for it, then torchrun and every rank are killed (no orphans). A second Ctrl-C kills
it at once; a second SIGTERM (a service manager repeating itself) waits for the save.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from ..io import hostio, paths
from ..run import runs
from .plan import LaunchPlan, job_env
from .progress import Watch


class _Stopper:
    """What the launcher's signal handlers do. Handlers only record and signal; printing (which may block on
    the terminal) happens on a thread."""

    def __init__(self, proc: subprocess.Popen, grace_s: float):
        self.proc, self.grace_s = proc, grace_s
        self.signals: list[int] = []
        self.say = print
        self._timer: threading.Timer | None = None

    def __call__(self, signum, _frame) -> None:
        self.signals.append(signum)
        name = signal.Signals(signum).name
        if len(self.signals) == 1:
            _send(self.proc.pid, signal.SIGTERM, group=False)
            self._timer = threading.Timer(self.grace_s, self.kill)
            self._timer.daemon = True
            self._timer.start()
            self._tell(f"{name}: the job finishes its optimizer step and saves a checkpoint "
                       f"(up to {self.grace_s:.0f} s; Ctrl-C again stops at once)")
        elif signum == signal.SIGINT:
            self.kill()
            self._tell("Ctrl-C again: stopped at once (a checkpoint being written is left incomplete; "
                       "a resume skips it)")
        else:
            self._tell(f"{name} again: still waiting for the checkpoint (Ctrl-C stops at once)")

    def kill(self) -> None:
        """SIGKILL the job's process group and every process under it: torchrun starts each rank in a session of
        its own (torch/distributed/elastic/multiprocessing/subprocess_handler), out of the group's reach. Only while
        the job's first process is unreaped: its pid is then still ours, never another's."""
        if self.proc.poll() is not None:
            return
        for pid in [self.proc.pid, *_descendants(self.proc.pid)]:
            _send(pid, signal.SIGKILL, group=True)
            _send(pid, signal.SIGKILL, group=False)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _tell(self, text: str) -> None:
        threading.Thread(target=self.say, args=(f"[rocmft] {text}",), daemon=True).start()


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found


def _send(pid: int, sig: int, *, group: bool) -> None:
    try:
        os.killpg(pid, sig) if group else os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(plan: LaunchPlan, run_dir: Path, *, quiet: bool = False, verbose: bool = False) -> int:
    env = job_env(plan, os.environ)
    log_path = run_dir / "train.log"
    runs.mark(run_dir, "running", runtime="local", launcher_pid=os.getpid(), host=socket.gethostname())

    proc = subprocess.Popen(plan.argv, cwd=paths.root(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    stopper = _Stopper(proc, plan.stop_timeout_s)
    previous = {s: signal.signal(s, stopper) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with hostio.open_append(log_path) as log, Watch(run_dir, sys.stdout, quiet=quiet, verbose=verbose) as watch:
            if watch.display is not None:
                stopper.say = watch.display.line
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                log.write(chunk)
                log.flush()
                watch.feed(chunk)
        code = proc.wait()
    finally:
        stopper.cancel()
        for s, handler in previous.items():
            signal.signal(s, handler)
        stopper.kill()  # a job still running here is being abandoned (an error in this process)
    if stopper.signals and code != 0:
        first = stopper.signals[0]
        runs.mark(run_dir, "interrupted", exit_code=128 + first, signal=signal.Signals(first).name)
        return 128 + first
    return code  # a job that finished before the stop reached it ends as it ended


def launch(prep, args) -> int:
    """`rocmft train --runtime local`: commit the run dir, record the plan, run it, say how it ended."""
    from ..hardware import host
    from ..io.problems import raise_if_errors
    from . import devices, prepared
    from .outcome import finish

    gpus = host.gpus_from_sysfs() if prep.arch.is_gpu else []
    plan = prepared.build_plan(prep, gpus=devices.choose(prep, gpus))
    if gpus:  # a CPU run holds no device, and asks no daemon
        raise_if_errors(devices.check(plan, prep.arch, gpus, containers=devices.docker_containers()))
    run_dir = prepared.commit(prep, plan, runtime="local")
    print(f"[rocmft] run dir: {runs.relative(run_dir)}", flush=True)
    print(f"[rocmft] command: {' '.join(plan.argv)}", flush=True)
    code = run(plan, run_dir, quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False))
    return finish(run_dir, code, prep.recipe.arch)
