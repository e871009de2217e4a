"""`make bench` / `make bench-report`: one measured row per run in results/bench.csv, and the planner beside it.

A bench run is an ordinary run of the recipe (same render, validation and runtime as `make train`) with a
fixed number of optimizer steps, saving and evaluation off, and rocmft.callbacks.metrics switched on
(ROCMFT_METRICS=1) inside every training process. That callback leaves <run dir>/metrics.json; this package
turns it into one CSV row (row, facts), appends it without touching the rows already there (csvfile), and,
for the report, puts the planner's prediction (rocmft.plan.check) beside each row (prediction, report).

No torch here: the host CLI imports this package. See docs/bench.md for what each column means.

May import: io, hardware, recipe, run, plan, pipeline.
"""

from __future__ import annotations

from .columns import COLUMNS, PRECISIONS, ZERO_STAGES, validate_row
from .csvfile import HEADER_LINE, append_row, check_results_file, read_rows
from .facts import _smi_product, commit, compute_mfu, gpu_model, method, peak_memory_gib, recipe_spec, zero_stage
from .inputs import DEFAULT_STEPS, RESULTS_ENV, WARMUP_STEPS, bench_overrides, check_steps, results_path
from .prediction import Prediction, ReportLine, compare, error_pct, predict
from .record import BENCH_FILE, mark_recorded, prepared_from_run, read_record, write_record
from .report import plot, render_notes, render_table
from .row import RowResult, build_row

__all__ = [
    "BENCH_FILE", "COLUMNS", "DEFAULT_STEPS", "HEADER_LINE", "PRECISIONS", "RESULTS_ENV", "WARMUP_STEPS",
    "ZERO_STAGES", "Prediction", "ReportLine", "RowResult", "_smi_product", "append_row", "bench_overrides",
    "build_row", "check_results_file", "check_steps", "commit", "compare", "compute_mfu", "error_pct",
    "gpu_model", "mark_recorded", "method", "peak_memory_gib", "plot", "predict", "prepared_from_run",
    "read_record", "read_rows", "recipe_spec", "render_notes", "render_table", "results_path", "validate_row",
    "write_record", "zero_stage",
]
