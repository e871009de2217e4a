"""What chat and serve share before anything starts: the run, its settings, its arch, its runtime, and the
GPUs, with every problem of the command line reported at once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..hardware import arches
from ..hardware.arches import Arch
from ..io.problems import Problem, ProblemReport
from ..launch.plan import devices_from_env, parse_gpus
from ..run import pick, run_trust
from ..run import target as serve_target
from . import plan as serve_plan
from . import settings as serve_settings


@dataclass(frozen=True)
class Session:
    target: serve_target.Target
    settings: dict[str, Any]
    arch: Arch
    runtime: str
    gpus: tuple[str, ...] | None
    messages: tuple[Problem, ...]  # notes and warnings for the CLI to print


def for_run(run: str, set_string: str, runtime: str | None, gpus: str | None,
            env: Mapping[str, str] | None = None) -> Session:
    env = os.environ if env is None else env
    problems: list[Problem] = []
    target = settings = arch = None
    try:
        run_dir, picked = pick.pick(run, key="RUN")
        problems += picked
        target = serve_target.load(run_dir)
        problems += run_trust.foreign_notes(run_dir, "RUN")
        problems += run_trust.remote_code_allowed(target.run_path, target.carried, env)
    except ProblemReport as report:
        problems += report.problems
    try:
        settings = serve_settings.parse(set_string)
    except ProblemReport as report:
        problems += report.problems
    chosen, selected = "", None
    if target is not None:
        try:
            arch = arches.get(target.arch, file=f"{target.run_path}/status.json")
        except ProblemReport as report:
            problems += report.problems
    if arch is not None:
        chosen, notes = serve_plan.choose_runtime(runtime, target.trained_runtime, arch.is_gpu)
        problems += notes
        try:
            selected = parse_gpus(gpus) or (devices_from_env(env) if arch.is_gpu and chosen == "docker" else None)
        except ProblemReport as report:
            problems += report.problems
    if any(p.severity == "error" for p in problems):
        raise ProblemReport(problems)
    messages = (*target.notes, *problems)
    return Session(target, settings, arch, chosen, selected, messages)


def for_arch(arch_name: str | None, runtime: str | None, gpus: str | None,
             env: Mapping[str, str] | None = None) -> tuple[Arch, str, tuple[str, ...] | None]:
    """`make webui`: ARCH= or this host's GPUs' arch, else cpu; docker for a GPU arch, local for cpu."""
    from ..hardware import host

    env = os.environ if env is None else env
    if arch_name:
        arch = arches.get(arch_name, key="ARCH")
    else:
        detected = next((a for a in host.gather(tools=False).gpu_arches if a in arches.table()), None)
        arch = arches.get(detected or "cpu", key="ARCH")
    chosen, problems = serve_plan.choose_runtime(runtime, "", arch.is_gpu)
    if problems:
        raise ProblemReport(problems)
    selected = parse_gpus(gpus) or (devices_from_env(env) if arch.is_gpu and chosen == "docker" else None)
    return arch, chosen, selected
