"""RUNTIME=docker: the launch plan inside the arch's image, driven through the Docker SDK.

Two halves:
  - `container_spec(plan, arch, host, image=...)` (spec.py) is pure: the plan, the arch and the host's facts
    in, a `ContainerSpec` out. Its module docstring gives the choices behind every field.
  - `launch(prep, args)` executes it: daemon, image (never pulled; its `ai.rocmft.arch` label must match),
    a container created detached with an init process, logs streamed to the terminal and train.log,
    Ctrl-C/SIGTERM -> stop + remove within seconds, the container's exit code as the command's.

checks.py judges the host before anything starts, daemon.py reaches the daemon and the image, run.py runs
the container, and left_behind.py finds containers a crashed launcher never removed (`make runs`).
"""

from __future__ import annotations

import os

from ...hardware.host import KFD
from ...io import hostio
from ...io.problems import Problem, ProblemReport, raise_if_errors
from ...run import runs
from .checks import check_host, check_mounts, create_cache_dirs
from .daemon import START_DAEMON, connect, daemon_configured, image_hint, resolve_image
from .left_behind import Leftover, labelled, leftovers, pid_alive
from .run import (
    EARLY_S,
    STOP_TIMEOUT_S,
    TAIL_LINES,
    run_container,
    runtime_environment,
    sdk_kwargs,
)
from .spec import (
    CACHE_ENV,
    CONTAINER_HOME,
    CPU_SHM,
    INPUT_KEYS,
    LABEL,
    RUN_LABEL,
    ContainerSpec,
    Mount,
    Ulimit,
    container_spec,
    docker_run_argv,
)

__all__ = [
    "CACHE_ENV", "CONTAINER_HOME", "CPU_SHM", "EARLY_S", "INPUT_KEYS", "LABEL", "RUN_LABEL", "START_DAEMON",
    "STOP_TIMEOUT_S", "TAIL_LINES", "ContainerSpec", "Leftover", "Mount", "Ulimit", "add_arguments", "check_host",
    "check_mounts", "connect", "container_spec", "create_cache_dirs", "daemon_configured", "docker_run_argv",
    "image_hint", "labelled", "launch", "leftovers", "pid_alive", "resolve_image", "run_container", "runtime_environment",
    "sdk_kwargs",
]


def add_arguments(parser) -> None:
    parser.add_argument("--docker-image", default=None,
                        help="RUNTIME=docker: run this local image instead of rocmft:<arch> (its arch label must match)")


def launch(prep, args) -> int:
    """`rocmft train --runtime docker`: check host, daemon and image, then commit the run and run it."""
    from ...hardware import host as host_facts
    from .. import devices, prepared
    from ..outcome import finish

    facts = host_facts.gather()
    plan = prepared.build_plan(prep, python="python", gpus=devices.choose(prep, facts.gpus))
    # what the recipe would have mounted is judged before the daemon is asked anything (one line per path)
    draft = container_spec(plan, prep.arch, facts, image="", args=prep.rendered.args)
    raise_if_errors([*check_host(plan, prep.arch, facts), *check_mounts(draft)])
    client = connect()
    if prep.arch.is_gpu:  # the GPUs another live run holds (its container included, when its launcher is gone)
        raise_if_errors(devices.check(plan, prep.arch, facts.gpus, containers=devices.docker_containers(client)))
    tag, image = resolve_image(client, prep.arch, getattr(args, "docker_image", None))
    spec = container_spec(plan, prep.arch, facts, image=tag, args=prep.rendered.args, launcher_pid=os.getpid())
    raise_if_errors(create_cache_dirs(spec))
    _refuse_name_clash(client, spec.name)

    from ...image import image_labels

    labels = image_labels(image)
    run_dir = prepared.commit(prep, plan, runtime="docker", image=image.id, image_tag=tag,
                              image_tags=list(image.tags or []), image_labels=labels)
    hostio.write_text(run_dir / "container.json", spec.to_json())
    print(f"[rocmft] run dir: {runs.relative(run_dir)}", flush=True)
    print(f"[rocmft] image: {tag} ({image.short_id}, built for {labels.get(LABEL + 'arch')})", flush=True)
    gpus = ", ".join(d for d in spec.devices if d != KFD) or "none"
    print(f"[rocmft] container: {spec.name} as {spec.user}, devices: {gpus}", flush=True)
    print(f"[rocmft] command: {' '.join(spec.command)}", flush=True)
    code = run_container(client, spec, run_dir, quiet=getattr(args, "quiet", False),
                         verbose=getattr(args, "verbose", False), stop_timeout=plan.stop_timeout_s)
    return finish(run_dir, code, prep.recipe.arch)


def _refuse_name_clash(client, name: str) -> None:
    from docker.errors import NotFound

    try:
        client.containers.get(name)
    except NotFound:
        return
    raise ProblemReport([Problem("", "container", f"a container named {name} already exists",
                                 f"`make runs` shows what it is; remove it with `docker rm -f {name}`")])
