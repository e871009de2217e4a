"""The CSV row of a finished bench run, with a note for every field it had to leave empty."""

from __future__ import annotations

import math
import shlex
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..run import runs
from .columns import DATE_FORMAT
from .facts import commit, compute_mfu, gpu_model, method, peak_memory_gib, recipe_spec, zero_stage


def _fmt(value: float | None, digits: int = 6) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:.{digits}g}"


@dataclass
class RowResult:
    row: dict[str, str]
    notes: list[str] = field(default_factory=list)


def build_row(prep, metrics: Mapping[str, Any], plan_result, *, steps: int, stored_overrides: list[str],
              host_versions: Mapping[str, str] | None = None, commit_id: str | None = None,
              now: datetime | None = None) -> RowResult:
    """One CSV row from a finished bench run: the recipe as prepared, its metrics.json, the planner's result."""
    recipe, arch = prep.recipe, prep.arch
    lf = prep.rendered.args
    notes: list[str] = []
    versions = dict(runs.stack_versions() if host_versions is None else host_versions)
    versions.update(metrics.get("versions") or {})  # the training process's view wins (the container's stack)
    tps = metrics.get("tokens_per_s_per_gpu")
    flops = peak = None
    workload = getattr(plan_result, "workload", None) if plan_result is not None else None
    throughput = getattr(plan_result, "throughput", None) if plan_result is not None else None
    if throughput is not None:
        flops, peak = throughput.flops_per_token, throughput.peak_tflops
    mfu = compute_mfu(tps, flops, peak)
    if mfu is None:
        if not arch.peak(prep.rendered.precision.name):
            notes.append(f"MFU left empty: docker/arches.yaml has no {prep.rendered.precision.name} peak for "
                         f"arch `{arch.name}`")
        elif workload is None:
            notes.append("MFU left empty: the planner could not model this recipe (no FLOPs per token)")
        else:
            notes.append("MFU left empty: no tokens/s was measured")
    rocm = versions.get("rocm") or versions.get("rocm_installed") or ("none" if not arch.is_gpu else "")
    row = {
        "date": (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(DATE_FORMAT),
        "host": str(metrics.get("host") or socket.gethostname()),
        "arch": arch.name,
        "gpu_model": gpu_model(arch, metrics),
        "gpu_count": str(int(metrics.get("world_size") or recipe.world_size)),
        "recipe": recipe_spec(recipe.path, recipe.name),
        "model": str(lf.get("model_name_or_path") or ""),
        "method": method(lf),
        "zero_stage": zero_stage(recipe.deepspeed),
        "cutoff_len": str(int(lf.get("cutoff_len", 2048))),  # LLaMA-Factory's default
        "micro_batch": str(int(metrics.get("micro_batch") or lf.get("per_device_train_batch_size", 8))),
        "grad_accum": str(int(metrics.get("grad_accum") or lf.get("gradient_accumulation_steps", 1))),
        "tokens_per_s_per_gpu": _fmt(tps),
        "mfu": _fmt(mfu, 4),
        "peak_mem_gib": _fmt(peak_memory_gib(metrics), 5),
        "step_time_p50_s": _fmt(metrics.get("step_time_p50_s")),
        "step_time_p90_s": _fmt(metrics.get("step_time_p90_s")),
        "rocm": rocm,
        "torch": versions.get("torch", ""),
        "llamafactory": versions.get("llamafactory", ""),
        "deepspeed": versions.get("deepspeed", "none"),
        "commit": commit_id or commit(),
        "precision": prep.rendered.precision.name,
        "steps": str(steps),
        "overrides": shlex.join(stored_overrides),
    }
    return RowResult(row, notes)
