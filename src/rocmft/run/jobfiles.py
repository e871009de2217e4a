"""Where in a run dir the job writes: its one writable folder (a leaf module: the host's run-dir code and the
job's callbacks both name these paths, and neither imports the other)."""

from __future__ import annotations

import os
from pathlib import Path

JOB_DIR = "output"  # LLaMA-Factory's output_dir is this folder (render.py); rocmft's job files sit beside its files
EVENTS = "progress.jsonl"
DIVERGED = "diverged.json"
METRICS = "metrics.json"


def job_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / JOB_DIR


def job_file(run_dir: Path | str, name: str) -> Path:
    """Where the job writes `name`; a run dir from before the host/job split has it at its top, and it is
    read there then."""
    new = job_dir(run_dir) / name
    old = Path(run_dir) / name
    return old if not os.path.lexists(new) and os.path.lexists(old) else new
