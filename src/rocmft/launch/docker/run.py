"""Running a ContainerSpec through the Docker SDK: create, start, stream the log, stop on a signal, remove."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ...io import hostio
from ...run import runs
from ..outcome import stopping_line
from .spec import ContainerSpec

STOP_TIMEOUT_S = 5  # SIGTERM, then SIGKILL, when the plan says nothing (its stop_grace_s: the ranks save first)
EARLY_S = 60  # a non-zero exit this soon after start is a container that died at start: show its log tail
TAIL_LINES = 20


def runtime_environment(spec: ContainerSpec, caller_env: Mapping[str, str]) -> dict[str, str]:
    """The environment the container is created with: the spec's, plus the secrets' values, read now."""
    env = dict(spec.environment)
    for name in spec.secret_env:
        if caller_env.get(name):
            env[name] = caller_env[name]
    return env


def sdk_kwargs(spec: ContainerSpec, caller_env: Mapping[str, str]) -> dict[str, Any]:
    """`client.containers.create(**kwargs)` for the spec (the only place secrets' values appear)."""
    from docker.types import Ulimit as DockerUlimit

    return dict(
        image=spec.image, command=list(spec.command), name=spec.name,
        environment=runtime_environment(spec, caller_env),
        devices=[f"{d}:{d}:rwm" for d in spec.devices] or None,
        group_add=list(spec.group_add) or None,
        ipc_mode=spec.ipc_mode, shm_size=spec.shm_size,
        cap_add=list(spec.cap_add) or None, network_mode=spec.network_mode,
        ulimits=[DockerUlimit(name=u.name, soft=u.soft, hard=u.hard) for u in spec.ulimits] or None,
        volumes={m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts},
        working_dir=spec.working_dir, user=spec.user, labels=dict(spec.labels), init=spec.init,
        stdin_open=spec.interactive, tty=spec.interactive,
    )


def run_container(client, spec: ContainerSpec, run_dir: Path, *, caller_env: Mapping[str, str] | None = None,
                  quiet: bool = False, verbose: bool = False, stop_timeout: int = STOP_TIMEOUT_S) -> int:
    """Create, start, stream, wait, remove. Returns the container's exit code (128+N when interrupted).

    The first Ctrl-C/SIGTERM stops the container with `stop_timeout` seconds for the job to save a checkpoint
    (SIGTERM reaches torchrun or the only process through the container's init); a second Ctrl-C kills it."""
    from docker.errors import APIError, DockerException, NotFound
    from requests.exceptions import RequestException

    from ..progress import Watch

    caller_env = os.environ if caller_env is None else caller_env
    log_path = run_dir / "train.log"
    interrupted: list[int] = []
    holder: dict[str, Any] = {}
    stoppers: list[threading.Thread] = []

    def stop(kill: bool) -> None:
        container = holder.get("container")
        if container is None:
            return
        try:
            container.kill() if kill else container.stop(timeout=stop_timeout)
        except (DockerException, RequestException):
            pass  # already gone; `remove(force=True)` below settles it either way

    def stopping(kill: bool, signame: str) -> None:
        if not kill:  # said before the stop: `container.stop` returns when the save is done
            holder.get("say", print)(stopping_line(signame, stop_timeout))
        stop(kill)

    def on_signal(signum, _frame):
        interrupted.append(signum)
        # A thread, not the handler: the main thread may be inside the SDK, reading the log stream.
        if len(interrupted) > 1 and signum != signal.SIGINT:
            return  # a repeated SIGTERM waits for the save
        thread = threading.Thread(target=stopping, args=(len(interrupted) > 1, signal.Signals(signum).name),
                                  daemon=True)
        stoppers.append(thread)
        thread.start()

    def say(text: str) -> None:
        print(f"[rocmft] {text}", flush=True)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    code, started = 1, None
    try:
        try:
            container = client.containers.create(**sdk_kwargs(spec, caller_env))
        except APIError as exc:
            say(f"the daemon refused to create the container: {exc.explanation or exc}")
            return 125
        holder["container"] = container
        runs.mark(run_dir, "running", runtime="docker", container=spec.name, container_id=container.id[:12],
                  image=spec.image, launcher_pid=os.getpid(), host=socket.gethostname())
        if not interrupted:
            try:
                container.start()
            except APIError as exc:
                say(f"the container did not start: {exc.explanation or exc}")
                for line in _tail_logs(container):
                    say(f"  | {line}")
                code = 125  # `docker run`'s code for "the daemon could not run it"
            else:
                started = time.monotonic()
                try:
                    # the job folder is mounted at the same path: its progress.jsonl is followed right here;
                    # train.log is the host's (the container cannot write the run dir above output/)
                    with hostio.open_append(log_path) as log, Watch(run_dir, sys.stdout, quiet=quiet, verbose=verbose) as watch:
                        if watch.display is not None:
                            holder["say"] = watch.display.line  # not through the live progress line
                        for chunk in container.logs(stream=True, follow=True):
                            log.write(chunk)
                            log.flush()
                            watch.feed(chunk)
                    code = int(container.wait().get("StatusCode", 1))
                except (DockerException, RequestException) as exc:
                    say(f"lost the container's log stream or status: {exc}")
                    code = 1
    finally:
        for thread in stoppers:
            thread.join(timeout=stop_timeout + 5)
        container = holder.get("container")
        if container is not None:
            try:
                container.remove(force=True)  # explicit: auto_remove races with logs() and wait()
            except NotFound:
                pass
            except (DockerException, RequestException) as exc:
                say(f"could not remove container {spec.name}: {exc} (docker rm -f {spec.name})")
        for s, handler in previous.items():
            signal.signal(s, handler)
    if interrupted:
        sig = interrupted[0]
        runs.mark(run_dir, "interrupted", exit_code=128 + sig, signal=signal.Signals(sig).name)
        return 128 + sig
    if code != 0 and started is not None and time.monotonic() - started < EARLY_S:
        # the lines that explain it follow from outcome.finish, as for every runtime
        say(f"the container exited with code {code} {time.monotonic() - started:.1f} s after it started")
    return code


def _tail_logs(container) -> list[str]:
    try:
        return container.logs(tail=TAIL_LINES).decode("utf-8", "replace").splitlines()
    except Exception:
        return []
