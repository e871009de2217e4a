"""The parts of benchmarks/gpu_truth.py (the one command a GPU owner runs): the bundle of wheels a bare GPU
machine lacks (bundle), the configurations and how one is run (matrix), the random model and the data (model),
the measured rows beside the planner (table)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
