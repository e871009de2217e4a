"""What is checked on this host before a container is created: GPUs, input mounts, cache directories."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ...hardware import arches
from ...hardware.arches import Arch
from ...hardware.host import KFD, HostFacts
from ...io.problems import Problem
from .. import mountable
from ..plan import LaunchPlan
from .spec import ContainerSpec


def no_gpu(arch: Arch, host: HostFacts) -> list[Problem]:
    """A GPU arch on a host with no AMD GPU at all: the first thing to say, before images or files."""
    if not arch.is_gpu or host.gpus:
        return []
    where = "/dev/kfd is missing" if KFD not in host.devices else "no GPU in the KFD topology"
    return [Problem("", "ARCH", f"no AMD GPU found on this host ({where}); the recipe targets {arch.name}",
                    "`make doctor` explains what is missing; on a machine without a GPU, `make demo` trains on CPU")]


def check_host(plan: LaunchPlan, arch: Arch, host: HostFacts) -> list[Problem]:
    """Before anything starts: does this host have the GPUs the plan asks for, of the right arch?"""
    problems = []
    if plan.nnodes > 1:
        problems.append(Problem("", "RUNTIME", f"RUNTIME=docker runs on this host only; the recipe asks for {plan.nnodes} nodes",
                                "RUNTIME=slurm (or k8s) for several nodes, or SET=nodes=1"))
    if not arch.is_gpu:
        return problems
    if not host.gpus:
        return problems + no_gpu(arch, host)
    count = len(host.gpus)
    if plan.visible_devices:
        unknown = [i for i in plan.visible_devices if int(i) >= count]
        if unknown:
            problems.append(Problem("", "GPUS", f"GPU {', '.join(unknown)} does not exist: this host has {count} GPU(s), "
                                    f"indices 0-{count - 1}", "`make doctor` lists them"))
            return problems
        chosen = [host.gpus[int(i)] for i in plan.visible_devices]
    else:
        # By default the run gets the GPUs of its arch and no other (spec.arch_gpu_indices): an enabled iGPU
        # (a Ryzen's gfx1036 beside an RX 7900 XTX) is neither counted nor handed to the container.
        mine = host.gpus_of(arch.name)
        if not mine:
            return problems + _wrong_arch(arch, sorted({g.gfx or "unknown" for g in host.gpus}))
        if plan.nproc_per_node > len(mine):
            others = f" (and {count - len(mine)} of another arch, not used)" if count > len(mine) else ""
            problems.append(Problem("", "gpus_per_node", f"the recipe runs {plan.nproc_per_node} processes (one per GPU) "
                                    f"but this host has {len(mine)} {arch.name} GPU(s){others}",
                                    f"SET=gpus_per_node={len(mine)} (and raise gradient_accumulation_steps to keep the "
                                    "global batch), or run on a host with more GPUs"))
            return problems
        chosen = list(mine)
    wrong = sorted({g.gfx for g in chosen if g.gfx and g.gfx != arch.name})
    if wrong:
        problems += _wrong_arch(arch, wrong)
    return problems


def _wrong_arch(arch: Arch, found: list[str]) -> list[Problem]:
    """GPUs of another arch: suggest only an arch the table has (an image exists for it)."""
    known = [a for a in found if a in arches.table() and arches.table()[a].is_gpu]
    if len(known) == 1:
        fix = f"ARCH={known[0]} (and `make image ARCH={known[0]}`)"
    elif known:
        fix = "select GPUs of one arch with GPUS="
    else:
        fix = (f"{', '.join(found)} is not an arch rocmft builds for (docker/arches.yaml: "
               f"{', '.join(a for a, v in arches.table().items() if v.is_gpu)}); `make doctor` lists this host's GPUs")
    return [Problem("", "ARCH", f"this host's GPUs are {', '.join(found)}, the recipe targets {arch.name} "
                    "(the image's kernels are built for one arch)", fix)]


def check_mounts(spec: ContainerSpec, caller_env: Mapping[str, str] | None = None) -> list[Problem]:
    """The paths a recipe chose (caches read-write, inputs read-only) only where launch/mountable.py allows;
    an input mount whose source does not exist (Docker would create an empty root-owned dir)."""
    caller_env = os.environ if caller_env is None else caller_env
    home = caller_env.get("HOME", "")
    # the host's HF_HOME: the container's own is elsewhere (spec.py), its datasets cache is <HF_HOME>/datasets
    hf_home = os.path.dirname(spec.environment.get("HF_DATASETS_CACHE", "")) or spec.environment.get("HF_HOME", "")
    # the image's own cache roots; before the image is resolved (a draft spec, image ""), any image's
    roots = mountable.cache_roots(spec.working_dir, caller_env, spec.image or mountable.ANY_IMAGE)
    problems: list[Problem] = []
    for mount in spec.mounts:
        key = mount.why.split()[0] if mount.why else ""  # "TRITON_CACHE_DIR cache", "model_name_or_path outside..."
        if mount.kind == "cache":
            refused = mountable.cache_problems([(key, mount.source)], roots, home)
        elif mount.kind == "input":
            refused = mountable.input_problems([(key, mount.source)], home, hf_home)
        else:  # rocmft's own (the project, the run dir, HF_HOME's caches): Docker reads `:` in a volume spec
            bad = mountable.syntax_problem("mount", mount.source) if ":" in mount.source else None
            refused = [bad] if bad else []
        if refused:
            problems += refused
            continue
        if not (mount.create or mount.made_by_launch) and not os.path.exists(mount.source):
            problems.append(Problem("", "mount", f"{mount.source} does not exist ({mount.why})",
                                    "fix the path in the recipe, or create it"))
    return problems


def create_cache_dirs(spec: ContainerSpec) -> list[Problem]:
    """Create the cache mounts as the invoking user, so Docker never makes them root-owned."""
    problems = []
    for path in (m.source for m in spec.mounts if m.create):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            problems.append(Problem("", "mount", f"cannot create {path}: {exc.strerror}",
                                    "make it writable for you, or point the variable elsewhere"))
    return problems
