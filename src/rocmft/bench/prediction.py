"""The planner beside a row: the row's recipe re-planned with its overrides, and the error of each prediction."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..hardware import arches
from ..io.problems import ProblemReport


@dataclass
class Prediction:
    memory_gib: float | None = None  # what torch's allocator should hold: the plan minus its HIP context/RCCL reserve
    plan_total_gib: float | None = None  # the planner's per-GPU total, reserve included
    tokens_per_s: tuple[float, float] | None = None
    mfu: tuple[float, float] | None = None  # the planner's utilisation range x its speed factors
    notes: list[str] = field(default_factory=list)


def _workload_differs(row: Mapping[str, str], w) -> list[str]:
    found = {"cutoff_len": w.cutoff_len, "micro_batch": w.micro_batch, "grad_accum": w.grad_accum,
             "gpu_count": w.world_size}
    return [f"{k} {row.get(k)} -> {v}" for k, v in found.items() if str(row.get(k, "")).strip() != str(v)]


def predict(row: Mapping[str, str]) -> Prediction:
    """Re-plan the row's recipe with the overrides it ran with (the planner as it is now)."""
    from ..recipe import recipes

    try:
        from .. import plan as planner
        from ..plan import memory as plan_memory
    except ImportError as exc:
        return Prediction(notes=[f"planner not available: {exc}"])
    pred = Prediction()
    try:
        overrides = shlex.split(row.get("overrides") or "")
        steps = int(row.get("steps") or 1)
        recipe = recipes.load(row["recipe"], overrides)
        result = planner.check(recipe, steps=max(steps, 1))
    except ProblemReport as exc:
        pred.notes.append("no prediction: " + "; ".join(p.message for p in exc.problems))
        return pred
    except (ValueError, KeyError) as exc:
        pred.notes.append(f"no prediction: {exc}")
        return pred
    if result.workload is None or result.memory is None:
        why = "; ".join(p.message for p in result.problems if p.severity == "error") or "the planner could not model it"
        pred.notes.append(f"no prediction: {why}")
        return pred
    w, mem, tp = result.workload, result.memory, result.throughput
    changed = _workload_differs(row, w)
    if changed:
        pred.notes.append("the recipe changed since this row (" + ", ".join(changed) + "): predicted for it as it is now")
    # The plan's reserve = HIP context (+ RCCL) + allocator fragmentation. torch.cuda.max_memory_reserved (the
    # measured column) holds the fragmentation but not the context, so the comparable figure drops the rest.
    reserve = mem.gib("reserve")
    used = mem.total_gib - reserve
    runtime = max(reserve - plan_memory.FRAGMENTATION * used, 0.0)
    pred.plan_total_gib = mem.total_gib
    pred.memory_gib = mem.total_gib - runtime
    if tp is not None and tp.tokens_per_s_gpu is not None:
        pred.tokens_per_s = tp.tokens_per_s_gpu
        pred.mfu = tp.effective_mfu
    elif tp is not None and tp.notes:
        pred.notes.append(tp.notes[0])
    return pred


def error_pct(measured: float | None, predicted: float | None) -> float | None:
    """(predicted - measured) / measured in %: + when the planner predicted more than was measured."""
    if measured is None or predicted is None or measured <= 0:
        return None
    return (predicted - measured) / measured * 100.0


def float_or_none(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


@dataclass
class ReportLine:
    number: int
    line: int
    row: dict[str, str]
    pred: Prediction
    tps: float | None
    tps_err: float | None
    mem: float | None
    mem_err: float | None
    mem_comparable: bool


def compare(numbered_rows: list[tuple[int, dict[str, str]]]) -> list[ReportLine]:
    out = []
    for i, (line, row) in enumerate(numbered_rows, 1):
        pred = predict(row)
        tps, mem = float_or_none(row.get("tokens_per_s_per_gpu")), float_or_none(row.get("peak_mem_gib"))
        arch = arches.table().get(row.get("arch", ""))
        comparable = arch is not None and arch.is_gpu  # a CPU row's memory is the process RSS, not a GPU's
        mid = sum(pred.tokens_per_s) / 2 if pred.tokens_per_s else None
        out.append(ReportLine(i, line, row, pred, tps, error_pct(tps, mid), mem,
                              error_pct(mem, pred.memory_gib) if comparable else None, comparable))
    return out
