"""RUNTIME=docker: the launch plan inside the arch's image, driven through the Docker SDK.

Two halves:
  - `container_spec(plan, arch, host, image=...)` is pure: the plan, the arch and the host's facts in, a
    `ContainerSpec` out (image, command, environment, devices, groups, IPC, seccomp, ulimits, mounts, user,
    labels). Unit tests pin it for any host; `container.json` in the run dir records it; `docker_run_argv`
    prints the same container as a `docker run` line (what `make shell` runs).
  - `launch(prep, args)` executes it: daemon, image (never pulled; its `ai.rocmft.arch` label must match),
    a container created detached with an init process, logs streamed to the terminal and train.log,
    Ctrl-C/SIGTERM -> stop + remove within seconds, the container's exit code as the command's.

Choices (docs/gpu.md explains them to users):
  - Paths: the project root is mounted at its own absolute path and is the working directory. The rendered
    files name paths relative to it, and every absolute path the plan carries (HF_HOME, TORCH_EXTENSIONS_DIR,
    a run dir under ROCMFT_RUNS, a model dir) means the same file on the host and in the container.
  - GPUs: all of them = /dev/kfd + /dev/dri (ROCr numbers them as on the host). A subset (GPUS=2,3) =
    /dev/kfd + only the render nodes of those GPUs: the KFD driver refuses a GPU whose render node the
    container cannot open, so the job cannot touch the other cards at all, and ROCr renumbers the visible
    ones from 0, so ROCR_VISIBLE_DEVICES is dropped (keeping "2,3" would select GPUs that do not exist
    in there). When the host's facts do not map an index to a render node, it falls back to /dev/dri plus
    ROCR_VISIBLE_DEVICES.
  - Groups by GID, not name: the image's /etc/group does not know the host's video/render GIDs.
  - `ipc=host`: RCCL and PyTorch pass tensors between the ranks of one node through shared memory; AMD's
    ROCm container instructions use it (a private /dev/shm would be 64 MB by default). The cpu arch gets a
    private 2 GB /dev/shm instead.
  - `seccomp=unconfined` on GPU arches only: Docker's default seccomp profile refuses the NUMA memory-policy
    syscalls (mbind, set_mempolicy, get_mempolicy) to a container without CAP_SYS_NICE, and ROCr uses them to
    place pinned host buffers; AMD's ROCm Docker instructions pass it. The cpu arch keeps Docker's profile.
  - memlock unlimited on GPU arches: ROCr/RCCL pin (mlock) host buffers for DMA.
  - The container runs as the invoking user (uid:gid), so run files are not root-owned; HOME is
    <project>/.cache/container-home (writable, and MIOpen/Triton kernel caches survive between runs).
  - Secrets (HF_TOKEN, ...): the spec holds their NAMES only; the values are read from the caller's
    environment when the container is created and are never written to a file by rocmft.
"""

from __future__ import annotations

import json
import os
import posixpath
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import runs
from ..arches import Arch
from ..host import DRI, KFD, HostFacts
from ..problems import Problem, ProblemReport, raise_if_errors
from ..recipes import SECRET_ENV
from .plan import LaunchPlan

LABEL = "ai.rocmft."
RUN_LABEL = LABEL + "run"
CONTAINER_HOME = ".cache/container-home"
CPU_SHM = "2g"
STOP_TIMEOUT_S = 5  # SIGTERM, then SIGKILL: torchrun passes SIGTERM to its ranks, which die at once
EARLY_S = 60  # a non-zero exit this soon after start is a container that died at start: show its log tail
TAIL_LINES = 20
# Rendered LLaMA-Factory keys that name files the job reads; an absolute path outside the mounts gets a
# read-only mount of its own (a model directory kept elsewhere, say /data/models/llama3-8b).
INPUT_KEYS = ("model_name_or_path", "adapter_name_or_path", "dataset_dir", "tokenized_path")
# Caches the plan passes by absolute path; outside the mounts they get a read-write mount (created first).
CACHE_ENV = ("TORCH_EXTENSIONS_DIR", "MPLCONFIGDIR", "HF_HUB_CACHE", "TRITON_CACHE_DIR", "MIOPEN_USER_DB_PATH")

START_DAEMON = ("start it: `sudo systemctl start docker`; in CI as root `eval \"$(scripts/ci/dockerd-up.sh)\"` "
                "(exports DOCKER_HOST); or train without Docker: RUNTIME=local")


@dataclass(frozen=True)
class Mount:
    source: str  # host path
    target: str  # container path (the same path: see the module docstring)
    read_only: bool = False
    create: bool = False  # a cache the launcher creates when missing; False = an input that must exist
    why: str = ""


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int
    hard: int


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    command: tuple[str, ...]
    name: str
    environment: Mapping[str, str]  # never a secret
    secret_env: tuple[str, ...]  # names only; values come from the caller's environment at create time
    devices: tuple[str, ...]
    group_add: tuple[str, ...]
    ipc_mode: str | None
    shm_size: str | None
    security_opt: tuple[str, ...]
    ulimits: tuple[Ulimit, ...]
    mounts: tuple[Mount, ...]
    working_dir: str
    user: str
    labels: Mapping[str, str]
    init: bool = True
    interactive: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["environment"] = dict(sorted(self.environment.items()))
        data["labels"] = dict(sorted(self.labels.items()))
        return data

    def to_json(self) -> str:
        return json.dumps({**self.to_dict(), "docker_run": docker_run_argv(self)}, indent=2) + "\n"


# ---------------------------------------------------------------- the pure part

def _inside(path: str, base: str) -> bool:
    path, base = posixpath.normpath(path), posixpath.normpath(base)
    return path == base or path.startswith(base.rstrip("/") + "/")


def _python_command(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The plan's argv with the host's interpreter replaced by the image's `python` (its venv is on PATH)."""
    if argv and posixpath.basename(argv[0]).startswith("python"):
        return ("python", *argv[1:])
    return tuple(argv)


def container_spec(
    plan: LaunchPlan,
    arch: Arch,
    host: HostFacts,
    *,
    image: str,
    args: Mapping[str, Any] | None = None,
    launcher_pid: int | None = None,
    command: tuple[str, ...] | None = None,
    name: str | None = None,
    interactive: bool = False,
) -> ContainerSpec:
    """Plan + arch + host facts -> the container. `args` are the rendered LLaMA-Factory args (for mounts
    of inputs kept outside the project); `command`/`name`/`interactive` are for `make shell`."""
    if arch.name != plan.arch:
        raise ValueError(f"plan is for {plan.arch}, arch is {arch.name}")
    root = posixpath.normpath(host.project_root)
    if not plan.run_path:
        run_dir = ""  # `make shell`: no run
    else:
        run_dir = plan.run_path if posixpath.isabs(plan.run_path) else posixpath.join(root, plan.run_path)

    mounts = [Mount(root, root, why="the project: recipes, data, models, rendered files, run dirs; "
                                    "the job's working directory (paths in the rendered files are relative to it)")]

    def covered(path: str) -> bool:
        return any(_inside(path, m.source) for m in mounts)

    runs_dir = posixpath.normpath(host.runs_dir) if host.runs_dir else posixpath.join(root, "runs")
    if not covered(runs_dir):
        mounts.append(Mount(runs_dir, runs_dir, create=True, why="run dirs (ROCMFT_RUNS is outside the project)"))
    hf_home = posixpath.normpath(host.hf_home)
    if not covered(hf_home):
        mounts.append(Mount(hf_home, hf_home, create=True, why="HF cache (HF_HOME): hub models, datasets, tokens"))
    for key in INPUT_KEYS:
        value = str((args or {}).get(key) or "")
        if posixpath.isabs(value) and not covered(value):
            mounts.append(Mount(posixpath.normpath(value), posixpath.normpath(value), read_only=True,
                                why=f"{key} outside the project (read-only)"))
    for key in CACHE_ENV:
        value = plan.env.get(key, "")
        if posixpath.isabs(value) and not covered(value):
            mounts.append(Mount(posixpath.normpath(value), posixpath.normpath(value), create=True, why=f"{key} cache"))

    env = {k: v for k, v in plan.env.items() if k not in SECRET_ENV}
    env["HF_HOME"] = hf_home
    env["HOME"] = posixpath.join(root, CONTAINER_HOME)

    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    ipc_mode, shm_size = None, CPU_SHM
    security_opt: tuple[str, ...] = ()
    ulimits: tuple[Ulimit, ...] = ()
    if arch.is_gpu:
        nodes = host.render_nodes(plan.visible_devices) if plan.visible_devices else None
        if nodes:
            devices = (KFD, *nodes)
            env.pop("ROCR_VISIBLE_DEVICES", None)  # only these GPUs exist in there, numbered from 0
        else:
            devices = (KFD, DRI)  # every GPU, or a subset by ROCR_VISIBLE_DEVICES when nodes are unknown
        group_add = tuple(dict.fromkeys(str(g) for g in (host.video_gid, host.render_gid) if g is not None))
        ipc_mode, shm_size = "host", None
        security_opt = ("seccomp=unconfined",)
        ulimits = (Ulimit("memlock", -1, -1),)

    labels = {LABEL + "arch": arch.name, LABEL + "image": image}
    if run_dir:
        labels[RUN_LABEL] = run_dir  # how `make runs` finds a container whose launcher is gone
    else:
        labels[LABEL + "shell"] = "1"
    if host.hostname:
        labels[LABEL + "launcher.host"] = host.hostname
    if launcher_pid is not None:
        labels[LABEL + "launcher.pid"] = str(launcher_pid)
    return ContainerSpec(
        image=image,
        command=tuple(command) if command is not None else _python_command(plan.argv),
        name=name or f"rocmft-{posixpath.basename(run_dir.rstrip('/')) or 'shell'}",
        environment=env,
        secret_env=tuple(n for n in plan.secret_env if n in SECRET_ENV),
        devices=devices,
        group_add=group_add,
        ipc_mode=ipc_mode,
        shm_size=shm_size,
        security_opt=security_opt,
        ulimits=ulimits,
        mounts=tuple(mounts),
        working_dir=root,
        user=f"{host.uid}:{host.gid}",
        labels=labels,
        init=True,
        interactive=interactive,
    )


def runtime_environment(spec: ContainerSpec, caller_env: Mapping[str, str]) -> dict[str, str]:
    """The environment the container is created with: the spec's, plus the secrets' values, read now."""
    env = dict(spec.environment)
    for name in spec.secret_env:
        if caller_env.get(name):
            env[name] = caller_env[name]
    return env


def check_host(plan: LaunchPlan, arch: Arch, host: HostFacts) -> list[Problem]:
    """Before anything starts: does this host have the GPUs the plan asks for, of the right arch?"""
    problems = []
    if plan.nnodes > 1:
        problems.append(Problem("", "RUNTIME", f"RUNTIME=docker runs on this host only; the recipe asks for {plan.nnodes} nodes",
                                "RUNTIME=slurm (or k8s) for several nodes, or SET=nodes=1"))
    if not arch.is_gpu:
        return problems
    if not host.gpus:
        where = "/dev/kfd is missing" if KFD not in host.devices else "no GPU in the KFD topology"
        problems.append(Problem("", "ARCH", f"no AMD GPU found on this host ({where}); the recipe targets {arch.name}",
                                "`make doctor` explains what is missing; on a machine without a GPU, `make demo` trains on CPU"))
        return problems
    count = len(host.gpus)
    if plan.visible_devices:
        unknown = [i for i in plan.visible_devices if int(i) >= count]
        if unknown:
            problems.append(Problem("", "GPUS", f"GPU {', '.join(unknown)} does not exist: this host has {count} GPU(s), "
                                    f"indices 0-{count - 1}", "`make doctor` lists them"))
            return problems
        chosen = [host.gpus[int(i)] for i in plan.visible_devices]
    else:
        if plan.nproc_per_node > count:
            problems.append(Problem("", "gpus_per_node", f"the recipe runs {plan.nproc_per_node} processes (one per GPU) "
                                    f"but this host has {count} GPU(s)",
                                    f"SET=gpus_per_node={count} (and raise gradient_accumulation_steps to keep the "
                                    "global batch), or run on a host with more GPUs"))
            return problems
        chosen = list(host.gpus[: plan.nproc_per_node])
    wrong = sorted({g.gfx for g in chosen if g.gfx and g.gfx != arch.name})
    if wrong:
        problems.append(Problem("", "ARCH", f"this host's GPUs are {', '.join(wrong)}, the recipe targets {arch.name} "
                                "(the image's kernels are built for one arch)",
                                f"ARCH={wrong[0]} (and `make image ARCH={wrong[0]}`)" if len(wrong) == 1 else
                                "select GPUs of one arch with GPUS="))
    return problems


def check_mounts(spec: ContainerSpec) -> list[Problem]:
    """An input mount whose source does not exist (Docker would create an empty root-owned dir)."""
    problems = []
    for mount in spec.mounts:
        if not mount.create and not os.path.exists(mount.source):
            problems.append(Problem("", "mount", f"{mount.source} does not exist ({mount.why})",
                                    "fix the path in the recipe, or create it"))
    return problems


def create_cache_dirs(spec: ContainerSpec) -> list[Problem]:
    """Create the cache mounts and HOME as the invoking user, so Docker never makes them root-owned."""
    problems = []
    wanted = [m.source for m in spec.mounts if m.create]
    if spec.environment.get("HOME"):
        wanted.append(spec.environment["HOME"])
    for path in wanted:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            problems.append(Problem("", "mount", f"cannot create {path}: {exc.strerror}",
                                    "make it writable for you, or point the variable elsewhere"))
    return problems


def docker_run_argv(spec: ContainerSpec, *, tty: bool = False) -> list[str]:
    """The same container as a `docker run` command line (secrets by name: the CLI reads their values)."""
    argv = ["docker", "run", "--rm", "--pull=never", "--name", spec.name]
    if spec.init:
        argv.append("--init")
    if spec.interactive:
        argv.append("-it" if tty else "-i")
    argv += [f"--device={d}" for d in spec.devices]
    argv += [f"--group-add={g}" for g in spec.group_add]
    if spec.ipc_mode:
        argv.append(f"--ipc={spec.ipc_mode}")
    if spec.shm_size:
        argv.append(f"--shm-size={spec.shm_size}")
    argv += [f"--security-opt={s}" for s in spec.security_opt]
    argv += [f"--ulimit={u.name}={u.soft}:{u.hard}" for u in spec.ulimits]
    argv += [f"--volume={m.source}:{m.target}" + (":ro" if m.read_only else "") for m in spec.mounts]
    argv += [f"--workdir={spec.working_dir}", f"--user={spec.user}"]
    argv += [f"--env={k}={v}" for k, v in sorted(spec.environment.items())]
    argv += [f"--env={name}" for name in spec.secret_env]
    argv += [f"--label={k}={v}" for k, v in sorted(spec.labels.items())]
    return [*argv, spec.image, *spec.command]


def sdk_kwargs(spec: ContainerSpec, caller_env: Mapping[str, str]) -> dict[str, Any]:
    """`client.containers.create(**kwargs)` for the spec (the only place secrets' values appear)."""
    from docker.types import Ulimit as DockerUlimit

    return dict(
        image=spec.image, command=list(spec.command), name=spec.name,
        environment=runtime_environment(spec, caller_env),
        devices=[f"{d}:{d}:rwm" for d in spec.devices] or None,
        group_add=list(spec.group_add) or None,
        ipc_mode=spec.ipc_mode, shm_size=spec.shm_size,
        security_opt=list(spec.security_opt) or None,
        ulimits=[DockerUlimit(name=u.name, soft=u.soft, hard=u.hard) for u in spec.ulimits] or None,
        volumes={m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts},
        working_dir=spec.working_dir, user=spec.user, labels=dict(spec.labels), init=spec.init,
        stdin_open=spec.interactive, tty=spec.interactive,
    )


# ---------------------------------------------------------------- the daemon and the image

def daemon_configured(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


def connect(timeout: int = 600):
    """A docker client that answered a ping, or a ProblemReport that says how to get one."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a dependency of the project
        raise ProblemReport([Problem("", "docker", "the Docker SDK for Python is not installed", "make setup")]) from None
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, PermissionError...
        text = str(exc)
        reason = (text.splitlines() or [type(exc).__name__])[0][:200]
        if "Permission denied" in text or "PermissionError" in text:
            fix = "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log in again); or RUNTIME=local"
        else:
            fix = START_DAEMON
        raise ProblemReport([Problem("", "DOCKER_HOST", f"cannot reach the Docker daemon at {where} ({reason})", fix)]) from None
    return client


def image_hint(arch_name: str) -> str:
    if arch_name == "cpu":
        return "build it: `make image ARCH=cpu OFFLINE=1` (no registry needed)"
    return f"build it: `make image ARCH={arch_name}`"


def resolve_image(client, arch: Arch, ref: str | None = None):
    """(tag, image) of the local image to run; refused when missing (never pulled) or built for another arch."""
    from ..image import find_image, image_arch, tags
    from ..image.docker_api import get_image

    if ref:
        image = get_image(client, ref)
        if image is None:
            raise ProblemReport([Problem("", "image", f"image {ref} is not present locally (rocmft never pulls)",
                                         image_hint(arch.name))])
        tag = ref
    else:
        image = find_image(client, arch.name)
        if image is None:
            raise ProblemReport([Problem("", "ARCH", f"no image for arch {arch.name} (looked for {', '.join(tags(arch.name))})",
                                         image_hint(arch.name))])
        wanted = tags(arch.name)
        tag = next((t for t in wanted if t in (image.tags or [])), wanted[0])
    built_for = image_arch(image)
    if built_for != arch.name:
        what = f"is built for {built_for}" if built_for else "has no ai.rocmft.arch label (not built by `make image`)"
        raise ProblemReport([Problem("", "image", f"image {tag} {what}; this run needs {arch.name}", image_hint(arch.name))])
    return tag, image


# ---------------------------------------------------------------- running it

def _tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def run_container(client, spec: ContainerSpec, run_dir: Path, *, caller_env: Mapping[str, str] | None = None,
                  quiet: bool = False) -> int:
    """Create, start, stream, wait, remove. Returns the container's exit code (128+N when interrupted)."""
    from docker.errors import APIError, DockerException, NotFound
    from requests.exceptions import RequestException

    from .progress import ProgressParser

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
            container.kill() if kill else container.stop(timeout=STOP_TIMEOUT_S)
        except (DockerException, RequestException):
            pass  # already gone; `remove(force=True)` below settles it either way

    def on_signal(signum, _frame):
        interrupted.append(signum)
        # A thread, not the handler: the main thread may be inside the SDK, reading the log stream.
        thread = threading.Thread(target=stop, args=(len(interrupted) > 1,), daemon=True)
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
                parser = ProgressParser()
                try:
                    with open(log_path, "ab") as log:
                        for chunk in container.logs(stream=True, follow=True):
                            log.write(chunk)
                            log.flush()
                            if not quiet:
                                sys.stdout.buffer.write(chunk)
                                sys.stdout.flush()
                            progress = parser.feed(chunk.decode("utf-8", "replace"))
                            if progress and not quiet:
                                say(progress.line())
                    code = int(container.wait().get("StatusCode", 1))
                except (DockerException, RequestException) as exc:
                    say(f"lost the container's log stream or status: {exc}")
                    code = 1
    finally:
        for thread in stoppers:
            thread.join(timeout=STOP_TIMEOUT_S + 5)
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
    if code != 0 and started is not None and (quiet or time.monotonic() - started < EARLY_S):
        elapsed = time.monotonic() - started
        say(f"the container exited with code {code} {elapsed:.1f} s after it started; the last lines of its log:")
        for line in _tail(log_path):
            say(f"  | {line}")
    return code


def _tail_logs(container) -> list[str]:
    try:
        return container.logs(tail=TAIL_LINES).decode("utf-8", "replace").splitlines()
    except Exception:
        return []


def add_arguments(parser) -> None:
    parser.add_argument("--docker-image", default=None,
                        help="RUNTIME=docker: run this local image instead of rocmft:<arch> (its arch label must match)")


def launch(prep, args) -> int:
    """`rocmft train --runtime docker`: check host, daemon and image, then commit the run and run it."""
    from .. import host as host_facts
    from .. import pipeline
    from .outcome import finish

    plan = pipeline.build_plan(prep, python="python")
    facts = host_facts.gather()
    raise_if_errors(check_host(plan, prep.arch, facts))
    client = connect()
    tag, image = resolve_image(client, prep.arch, getattr(args, "docker_image", None))
    spec = container_spec(plan, prep.arch, facts, image=tag, args=prep.rendered.args, launcher_pid=os.getpid())
    raise_if_errors(check_mounts(spec))
    raise_if_errors(create_cache_dirs(spec))
    _refuse_name_clash(client, spec.name)

    run_dir = pipeline.commit(prep)
    (run_dir / "plan.json").write_text(plan.to_json())
    (run_dir / "container.json").write_text(spec.to_json())
    from ..image import image_labels

    labels = image_labels(image)
    runs.write_versions(run_dir, image=image.id, extra={"runtime": "docker", "image_tag": tag,
                                                        "image_tags": list(image.tags or []), "image_labels": labels})
    print(f"[rocmft] run dir: {runs.relative(run_dir)}", flush=True)
    print(f"[rocmft] image: {tag} ({image.short_id}, built for {labels.get(LABEL + 'arch')})", flush=True)
    gpus = ", ".join(d for d in spec.devices if d != KFD) or "none"
    print(f"[rocmft] container: {spec.name} as {spec.user}, devices: {gpus}", flush=True)
    print(f"[rocmft] command: {' '.join(spec.command)}", flush=True)
    code = run_container(client, spec, run_dir, quiet=getattr(args, "quiet", False))
    return finish(run_dir, code, prep.recipe.arch)


def _refuse_name_clash(client, name: str) -> None:
    from docker.errors import NotFound

    try:
        client.containers.get(name)
    except NotFound:
        return
    raise ProblemReport([Problem("", "container", f"a container named {name} already exists",
                                 f"`make runs` shows what it is; remove it with `docker rm -f {name}`")])


# ---------------------------------------------------------------- containers left behind (`make runs`)

@dataclass(frozen=True)
class Leftover:
    name: str
    status: str  # running | exited | created ...
    run: str
    launcher: str  # "pid 123 on host"
    why: str

    @property
    def fix(self) -> str:
        return f"docker rm -f {self.name}"


def leftovers(containers: list[tuple[str, str, Mapping[str, str]]], hostname: str, alive) -> tuple[list[Leftover], dict[str, str]]:
    """Pure: (name, status, labels) of the containers labelled ai.rocmft.run -> (left behind, run -> active
    container). A container is left behind when its launcher is gone: same host and that pid is dead.
    A launcher on another host cannot be judged from here: reported only once its container stopped."""
    left, active = [], {}
    for name, status, labels in containers:
        run = labels.get(RUN_LABEL, "")
        pid, where = labels.get(LABEL + "launcher.pid", ""), labels.get(LABEL + "launcher.host", "")
        launcher = f"pid {pid or '?'} on {where or '?'}"
        if where == hostname and pid.isdigit():
            gone = not alive(int(pid))
            why = "its launcher is gone" if gone else ""
        else:
            gone = status != "running"
            why = f"launcher on another host ({where or '?'}), container {status}" if gone else ""
        if gone:
            left.append(Leftover(name, status, run, launcher, why))
        else:
            active[run] = name
    return left, active


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
