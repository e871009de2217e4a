"""RUNTIME=local: the plan as a process of this venv (its LLaMA-Factory, its CPU torch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..hardware.arches import Arch
from ..io import paths
from ..io.problems import Problem
from ..launch import plan as launch_plan
from .plan import CLI, ServePlan


def bin_dir() -> Path:
    return Path(sys.executable).parent


def check(plan: ServePlan, arch: Arch) -> list[Problem]:
    """This venv can run it: LLaMA-Factory is installed (the CPU training stack, not the light host)."""
    problems = []
    if not (bin_dir() / CLI).is_file():
        problems.append(Problem("", "RUNTIME", "RUNTIME=local runs LLaMA-Factory from this venv, which does not have it "
                                "(the light host)", "`make setup` installs the CPU stack, or RUNTIME=docker"))
    if arch.is_gpu:
        problems.append(Problem("", "RUNTIME", f"the run is for {arch.name}; this venv's torch is the CPU build, so "
                                "the model runs on CPU (slow for a large model)", "RUNTIME=docker for the GPUs",
                                severity="note"))
    return problems


def argv(plan: ServePlan) -> list[str]:
    """The plan's neutral argv with this venv's executables."""
    names = {CLI: str(bin_dir() / CLI), "python": sys.executable}
    return [names.get(plan.argv[0], plan.argv[0]), *plan.argv[1:]]


def environment(plan: ServePlan, arch: Arch, caller_env: Mapping[str, str]) -> dict[str, str]:
    """The arch's job environment (as `make shell` gets it), then the plan's. Secrets (API_KEY, HF_TOKEN)
    are in the caller's environment already and are inherited as they are."""
    base = launch_plan.shell(arch, caller_env, None)
    env = launch_plan.job_env(base, caller_env)
    if not arch.is_gpu and "OMP_NUM_THREADS" not in caller_env:
        # the cpu arch pins one thread per training rank; one inference process should use every core
        env.pop("OMP_NUM_THREADS", None)
    env.update(plan.env)
    return env


def log_path(plan: ServePlan) -> Path:
    """The server's log: every request's prompt passes through it, so only the user can read it (the folder
    0700, the file 0600, also when an earlier version left them readable)."""
    folder = paths.cache_dir() / "serve"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / f"{plan.kind}-{plan.name}.log"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    path.chmod(0o600)
    return path


def chat(plan: ServePlan, arch: Arch, caller_env: Mapping[str, str]) -> int:
    """The interactive chat: LLaMA-Factory's REPL on this terminal."""
    return subprocess.call(argv(plan), env=environment(plan, arch, caller_env), cwd=paths.root())


def ask(plan: ServePlan, arch: Arch, caller_env: Mapping[str, str], *, verbose: bool = False) -> tuple[int, list[str]]:
    """One answer on stdout. The loading log is kept back unless VERBOSE=1 or the job fails: (code, log tail)."""
    proc = subprocess.run(argv(plan), env=environment(plan, arch, caller_env), cwd=paths.root(),
                          stdout=None, stderr=None if verbose else subprocess.PIPE)
    tail = [] if verbose else (proc.stderr or b"").decode("utf-8", "replace").splitlines()[-30:]
    return proc.returncode, tail


def ask_captured(plan: ServePlan, arch: Arch, caller_env: Mapping[str, str]) -> tuple[int, str, list[str]]:
    """`ask`, its stdout captured (`--base-too` prints one JSON line to be shown by the caller): (code, stdout, log tail)."""
    proc = subprocess.run(argv(plan), env=environment(plan, arch, caller_env), cwd=paths.root(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tail = (proc.stderr or b"").decode("utf-8", "replace").splitlines()[-30:]
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), tail


def _die_with_parent() -> None:
    """In the child: SIGTERM when the launcher dies (even by SIGKILL), so no server outlives it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Process:
    """foreground.Handle for a process in its own session: signals reach it only through us, exactly once."""

    def __init__(self, argv_: list[str], env: Mapping[str, str]):
        self.proc = subprocess.Popen(argv_, env=dict(env), cwd=paths.root(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_die_with_parent)

    def chunks(self) -> Iterable[bytes]:
        assert self.proc.stdout is not None
        return iter(self.proc.stdout.readline, b"")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, kill: bool) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def cleanup(self) -> None:
        if self.alive():
            self.stop(True)
            self.proc.wait()
        try:  # the server's own children (Gradio spawns none by default; a training started from LlamaBoard does)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
