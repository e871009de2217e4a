"""RUNTIME=docker: the plan in the arch's image, with the devices, groups and mounts a training run gets
(launch/docker's `container_spec`, the one source of them), a server on the host's network bound to HOST.

`container(...)` is pure (a test pins it as data); the rest drives the Docker SDK: servers and one-shot
answers through the SDK, the interactive chat through the `docker` client (a TTY), as `make shell` does.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable, Mapping

from ..hardware.arches import Arch
from ..hardware.host import HostFacts
from ..io.problems import Problem, ProblemReport
from ..launch import docker as rt
from ..launch import plan as launch_plan
from .plan import ServePlan

SERVE_LABEL = rt.LABEL + "serve"
# What LlamaBoard writes under its working directory (llamafactory/webui/common.py: DEFAULT_SAVE_DIR,
# DEFAULT_CACHE_DIR, DEFAULT_CONFIG_DIR): writable in a checkout that is otherwise read-only.
WEBUI_FOLDERS = ("saves", "llamaboard_cache", "llamaboard_config")


def container(plan: ServePlan, arch: Arch, facts: HostFacts, *, image: str, caller_env: Mapping[str, str],
              gpus: tuple[str, ...] | None = None, launcher_pid: int | None = None) -> rt.ContainerSpec:
    """A job's container on this arch running the plan's argv."""
    base = launch_plan.shell(arch, caller_env, gpus, argv=plan.argv)
    env = dict(base.env)
    if not arch.is_gpu and "OMP_NUM_THREADS" not in caller_env:
        env.pop("OMP_NUM_THREADS", None)  # one inference process: every core (training pins one per rank)
    env.update(plan.env)
    # A server shares the host's network and binds HOST itself: on Docker's bridge it would listen on
    # 0.0.0.0 inside, reachable at 172.17.0.x by every local user and every other container, whatever the
    # published port said. One-shot answers and the interactive chat listen nowhere and keep the bridge.
    spec = rt.container_spec(dataclasses.replace(base, env=env), arch, facts, image=image, args=plan.infer_args,
                             command=plan.argv, interactive=plan.interactive, training=False,
                             writable=WEBUI_FOLDERS if plan.kind == "webui" else (),
                             network_mode="host" if plan.port else None,
                             name=f"rocmft-{plan.kind}-{_slug(plan.name)}-{launcher_pid or os.getpid()}")
    labels = {k: v for k, v in spec.labels.items() if k != rt.LABEL + "shell"}
    labels[SERVE_LABEL] = plan.kind
    if launcher_pid is not None:
        labels[rt.LABEL + "launcher.pid"] = str(launcher_pid)
    # API_KEY is a secret of this command only (launch's SECRET_ENV is the job's): by name, value at create
    secrets = tuple(dict.fromkeys((*spec.secret_env, *plan.secret_env)))
    return dataclasses.replace(spec, labels=labels, secret_env=secrets)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in name)[:60] or "run"


def prepare(plan: ServePlan, arch: Arch, *, image_ref: str | None, gpus: tuple[str, ...] | None,
            caller_env: Mapping[str, str]):
    """Every check before anything starts: host GPUs, daemon, image (never pulled), mounts, name.
    Returns (client, spec)."""
    from ..hardware import host as host_facts
    from ..io.problems import raise_if_errors

    facts = host_facts.gather()
    raise_if_errors(rt.check_host(launch_plan.shell(arch, caller_env, gpus), arch, facts))
    client = rt.connect(timeout=60)
    tag, _image = rt.resolve_image(client, arch, image_ref)
    spec = container(plan, arch, facts, image=tag, caller_env=caller_env, gpus=gpus,
                            launcher_pid=os.getpid())
    raise_if_errors(rt.check_mounts(spec, caller_env))
    raise_if_errors(rt.create_cache_dirs(spec))
    return client, spec


def create(client, spec: rt.ContainerSpec, caller_env: Mapping[str, str]):
    from docker.errors import APIError

    try:
        return client.containers.create(**rt.sdk_kwargs(spec, caller_env))
    except APIError as exc:
        raise ProblemReport([Problem("", "docker", f"the daemon refused to create the container: "
                                     f"{exc.explanation or exc}")]) from None


class Container:
    """foreground.Handle for a started container; `cleanup` removes it whatever happened."""

    def __init__(self, client, spec: rt.ContainerSpec, caller_env: Mapping[str, str]):
        from docker.errors import APIError

        self.container = create(client, spec, caller_env)
        try:
            self.container.start()
        except APIError as exc:
            self.cleanup()
            raise ProblemReport([Problem("", "docker", f"the container did not start: {exc.explanation or exc}")]) from None

    def chunks(self) -> Iterable[bytes]:
        return self.container.logs(stream=True, follow=True)

    def alive(self) -> bool:
        from docker.errors import DockerException
        from requests.exceptions import RequestException

        try:
            self.container.reload()
        except (DockerException, RequestException):
            return False
        return self.container.status in ("created", "running", "restarting")

    def stop(self, kill: bool) -> None:
        from docker.errors import DockerException
        from requests.exceptions import RequestException

        try:
            self.container.kill() if kill else self.container.stop(timeout=rt.STOP_TIMEOUT_S)
        except (DockerException, RequestException):
            pass

    def wait(self, timeout: float | None) -> int | None:
        from docker.errors import DockerException
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import ReadTimeout

        try:
            return int(self.container.wait(timeout=timeout).get("StatusCode", 1))
        except (ReadTimeout, RequestsConnectionError):
            return exit_code_if_ended(self.container)
        except DockerException:
            return 1

    def cleanup(self) -> None:
        from docker.errors import DockerException, NotFound
        from requests.exceptions import RequestException

        try:
            self.container.remove(force=True)
        except NotFound:
            pass
        except (DockerException, RequestException) as exc:
            print(f"[rocmft] could not remove container {self.container.name}: {exc} "
                  f"(docker rm -f {self.container.name})", file=sys.stderr)


def exit_code_if_ended(container) -> int | None:
    """None while the container runs, else its own exit code. A container that ends between a wait's
    timeout and this look keeps its code: reading "not running" as 1 failed a finished answer (CI, once)."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException

    try:
        container.reload()
    except (DockerException, RequestException):
        return 1  # removed, or the daemon is gone: no code left to read
    if container.status in ("created", "running", "restarting"):
        return None
    return int((container.attrs.get("State") or {}).get("ExitCode", 1))


def chat(spec: rt.ContainerSpec) -> int:
    """The interactive chat: `docker run -it` on this terminal (the SDK has no TTY to give it)."""
    import shutil
    import subprocess

    cli = shutil.which("docker")
    if not cli:
        raise ProblemReport([Problem("", "docker", "an interactive chat in the container needs the docker "
                                     "command-line client (a TTY)",
                                     "install it (`sudo apt-get install docker.io` or docker-ce-cli), "
                                     "or use PROMPT=\"...\" for one answer")])
    argv = rt.docker_run_argv(spec, tty=sys.stdin.isatty() and sys.stdout.isatty())
    argv[0] = cli
    return subprocess.call(argv)  # secrets go by name (-e API_KEY): the docker client reads them from here


def ask(client, spec: rt.ContainerSpec, caller_env: Mapping[str, str], *, verbose: bool = False) -> tuple[int, str, list[str]]:
    """One answer from a container: (exit code, the answer from its stdout, its stderr's last lines)."""
    import signal
    import threading

    handle = Container(client, spec, caller_env)
    previous = {s: signal.signal(s, lambda *_: threading.Thread(target=handle.stop, args=(False,), daemon=True).start())
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if verbose:
            for chunk in handle.container.logs(stream=True, follow=True, stdout=False, stderr=True):
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
        code = None
        while code is None:
            code = handle.wait(5)
        answer = handle.container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        errors = handle.container.logs(stdout=False, stderr=True, tail=30).decode("utf-8", "replace").splitlines()
        return code, answer, errors
    finally:
        handle.cleanup()
        for s, handler in previous.items():
            signal.signal(s, handler)
