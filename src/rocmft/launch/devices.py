"""Which GPUs a run is handed, and which GPUs a running run on this host already holds.

A run gets only the GPUs it uses: GPUS= (or a selection already made in the shell), else the first
`gpus_per_node` GPUs of its recipe's arch, by ROCr index. Handed every GPU, a one-GPU run would always use GPU 0
and a second one would land on the same card.

Before a local or Docker run starts, the GPUs it would get are compared with what the runs on this host hold. A
run holds the GPUs its plan.json names (`visible_devices`; a plan that names none, as before this rule, holds
every GPU of its arch) while it is alive: its status.json says `running` on this host and its launcher process
lives, or (RUNTIME=docker) its container is still there, as after its launcher was killed. A run whose process or
container is gone holds nothing. Nothing is locked: two launches in the same second can both pass.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..hardware.arches import Arch
from ..hardware.host import GPU
from ..io import hostio, paths
from ..io.problems import Problem
from ..run import runs
from .plan import LaunchPlan

# Docker's container states in which a container still has its devices (`docker ps -a` shows the others too).
HOLDING_STATES = ("created", "running", "restarting", "paused")


@dataclass(frozen=True)
class Holder:
    run: str  # the run dir as the CLI names it
    gpus: tuple[str, ...]  # ROCr indices on this host
    how: str  # "pid 4242" | "container rocmft-x"


def default_selection(arch: Arch, host_gpus: Sequence[GPU], nproc: int) -> tuple[str, ...] | None:
    """The first `nproc` GPUs of the arch; None for the CPU arch or when the host has fewer (the runtime's own
    host check says so)."""
    mine = [str(g.index) for g in host_gpus if g.gfx == arch.name]
    if not arch.is_gpu or len(mine) < nproc:
        return None
    return tuple(mine[:nproc])


def choose(prep, host_gpus: Sequence[GPU]) -> tuple[str, ...] | None:
    """What a prepared run is handed: the user's selection, else the default one."""
    return prep.gpus or default_selection(prep.arch, host_gpus, prep.recipe.gpus_per_node)


def holder(run: str, status: Mapping[str, Any], plan: Mapping[str, Any], *, hostname: str,
           alive: Callable[[int], bool], container: tuple[str, str] | None,
           arch_gpus: Callable[[str], tuple[str, ...]]) -> Holder | None:
    """Pure: what one run dir holds on this host, from its status.json and plan.json (and its container, when the
    daemon listed one: (name, state)). None when it holds nothing."""
    if status.get("state") != "running" or status.get("host") != hostname:
        return None
    pid = status.get("launcher_pid")
    if isinstance(pid, int) and not isinstance(pid, bool) and alive(pid):
        how = f"pid {pid}"
    elif container is not None and container[1] in HOLDING_STATES:
        how = f"container {container[0]}, its launcher gone"
    else:
        return None
    named = plan.get("visible_devices")
    if isinstance(named, list) and all(isinstance(g, str) for g in named):
        gpus = tuple(named)
    else:
        gpus = arch_gpus(str(plan.get("arch") or status.get("arch") or ""))
    return Holder(run, gpus, how) if gpus else None


def busy(wanted: Sequence[str], nproc: int, arch: Arch, host_gpus: Sequence[GPU],
         holders: Sequence[Holder]) -> list[Problem]:
    """Pure: one error per run that holds GPUs this run wants, with the free ones to ask for instead."""
    taken = {g for h in holders for g in h.gpus}
    free = [str(g.index) for g in host_gpus if g.gfx == arch.name and str(g.index) not in taken]
    if len(free) >= nproc:
        fix = f"GPUS={','.join(free[:nproc])} is free; or wait for that run to end (`make runs`)"
    else:
        fix = (f"{len(free)} {arch.name} GPU(s) free{' (' + ','.join(free) + ')' if free else ''}, the run needs "
               f"{nproc}: wait for that run to end, or stop it (`make runs`)")
    problems = []
    for h in holders:
        overlap = [g for g in wanted if g in h.gpus]
        if overlap:
            problems.append(Problem("", "GPUS", f"GPU {','.join(overlap)} {'is' if len(overlap) == 1 else 'are'} in "
                                    f"use by run {h.run} ({h.how})", fix))
    return problems


def holders(host_gpus: Sequence[GPU], *, containers: Mapping[str, tuple[str, str]] | None = None,
            hostname: str | None = None, alive: Callable[[int], bool] | None = None) -> list[Holder]:
    """The runs under the runs folder that hold GPUs on this host. `containers`: run dir -> (container name, state),
    as the daemon lists the containers labelled with a run (left_behind.labelled); None when it was not asked."""
    from .docker.left_behind import pid_alive

    base = paths.runs_dir()
    if not base.is_dir():
        return []
    by_run = {_key(run): c for run, c in (containers or {}).items()}
    hostname = hostname or socket.gethostname()

    def arch_gpus(gfx: str) -> tuple[str, ...]:
        return tuple(str(g.index) for g in host_gpus if not gfx or g.gfx == gfx)

    found = []
    for run_dir in sorted(p for p in base.iterdir() if (p / "plan.json").is_file()):
        held = holder(runs.relative(run_dir), runs.read_status(run_dir), hostio.read_json(run_dir / "plan.json") or {},
                      hostname=hostname, alive=alive or pid_alive, container=by_run.get(_key(run_dir)),
                      arch_gpus=arch_gpus)
        if held is not None:
            found.append(held)
    return found


def check(plan: LaunchPlan, arch: Arch, host_gpus: Sequence[GPU], *,
          containers: Mapping[str, tuple[str, str]] | None = None) -> list[Problem]:
    """Before a run on this host starts: are the GPUs it would get held by a run that is still alive?"""
    if not arch.is_gpu or not host_gpus:
        return []
    wanted = plan.visible_devices or tuple(str(g.index) for g in host_gpus if g.gfx == arch.name)
    return busy(wanted, plan.nproc_per_node, arch, host_gpus, holders(host_gpus, containers=containers))


def docker_containers(client=None) -> dict[str, tuple[str, str]] | None:
    """run dir -> (name, state) of the containers labelled with a run, from the daemon; None when none is configured
    or it does not answer (a run whose launcher is gone is then judged by its process alone)."""
    from ..image.docker_api import daemon_configured
    from .docker.left_behind import labelled
    from .docker.spec import RUN_LABEL

    try:
        if client is None:
            if not daemon_configured():
                return None
            from ..image.docker_api import connect

            client = connect(timeout=10)
        return {labels[RUN_LABEL]: (name, state) for name, state, labels in labelled(client) if labels.get(RUN_LABEL)}
    except Exception:  # noqa: BLE001 - the check goes on without the daemon's word
        return None


def _key(path: str | Path) -> str:
    return os.path.realpath(path)
