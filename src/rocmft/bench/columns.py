"""The bench row's columns and what makes a row valid (checked before appending and on every row the report reads)."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from datetime import datetime

from ..hardware import arches

# The columns, in its order (cutoff / micro-batch / grad-accum split in three), then the three that make
# a row re-plannable by `bench-report`: the compute precision, the steps run, and the overrides the run used.
COLUMNS = (
    "date", "host", "arch", "gpu_model", "gpu_count", "recipe", "model", "method", "zero_stage",
    "cutoff_len", "micro_batch", "grad_accum", "tokens_per_s_per_gpu", "mfu", "peak_mem_gib",
    "step_time_p50_s", "step_time_p90_s", "rocm", "torch", "llamafactory", "deepspeed", "commit",
    "precision", "steps", "overrides",
)
ZERO_STAGES = ("none", "0", "1", "2", "3", "3-offload")
PRECISIONS = ("bf16", "fp16", "fp32")
DATE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_METHOD = re.compile(r"^(lora|full|freeze)(\+\d+bit)?$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}(\+dirty)?$")


def _number(row: Mapping[str, str], key: str, problems: list[str], *, integer: bool = False,
            minimum: float | None = None, maximum: float | None = None, positive: bool = False,
            optional: bool = False) -> float | None:
    text = (row.get(key) or "").strip()
    if text == "":
        if not optional:
            problems.append(f"{key}: empty")
        return None
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        problems.append(f"{key}: `{text}` is not {'a whole number' if integer else 'a number'}")
        return None
    if not math.isfinite(value):
        problems.append(f"{key}: `{text}` is not finite")
        return None
    if positive and value <= 0:
        problems.append(f"{key}: must be > 0, got {text}")
    if minimum is not None and value < minimum:
        problems.append(f"{key}: must be >= {minimum:g}, got {text}")
    if maximum is not None and value > maximum:
        problems.append(f"{key}: must be <= {maximum:g}, got {text}")
    return value


def validate_row(row: Mapping[str, str]) -> list[str]:
    """What is wrong with a row (empty: a valid row). Used before appending and on every row the report reads."""
    problems: list[str] = []
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        return [f"missing columns: {', '.join(missing)}"]
    try:
        datetime.strptime(row["date"], DATE_FORMAT)
    except ValueError:
        problems.append(f"date: `{row['date']}` is not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ)")
    for key in ("host", "gpu_model", "recipe", "model", "torch", "llamafactory", "deepspeed", "rocm"):
        if not (row.get(key) or "").strip():
            problems.append(f"{key}: empty")
    table = arches.table()
    arch = table.get(row["arch"])
    if arch is None:
        problems.append(f"arch: unknown arch `{row['arch']}` (known: {', '.join(table)})")
    _number(row, "gpu_count", problems, integer=True, minimum=1)
    if row["method"] and not _METHOD.match(row["method"]):
        problems.append(f"method: `{row['method']}` is not lora, full or freeze (with +4bit/+8bit for quantized)")
    if row["zero_stage"] not in ZERO_STAGES:
        problems.append(f"zero_stage: `{row['zero_stage']}` is not one of {', '.join(ZERO_STAGES)}")
    for key in ("cutoff_len", "micro_batch", "grad_accum", "steps"):
        _number(row, key, problems, integer=True, minimum=1)
    _number(row, "tokens_per_s_per_gpu", problems, positive=True)
    _number(row, "mfu", problems, optional=True, positive=True, maximum=1.0)  # empty: no known peak
    _number(row, "peak_mem_gib", problems, positive=True)
    p50 = _number(row, "step_time_p50_s", problems, positive=True)
    p90 = _number(row, "step_time_p90_s", problems, positive=True)
    if p50 is not None and p90 is not None and p90 < p50:
        problems.append(f"step_time_p90_s ({p90:g}) is below step_time_p50_s ({p50:g})")
    if arch is not None and arch.is_gpu and row["rocm"] in ("", "none"):
        problems.append("rocm: a GPU row needs the ROCm version")
    if not _COMMIT.match(row["commit"]):
        problems.append(f"commit: `{row['commit']}` is not a git commit id")
    if row["precision"] not in PRECISIONS:
        problems.append(f"precision: `{row['precision']}` is not one of {', '.join(PRECISIONS)}")
    try:
        shlex.split(row["overrides"])
    except ValueError as exc:
        problems.append(f"overrides: not a shell-quoted list ({exc})")
    return problems
