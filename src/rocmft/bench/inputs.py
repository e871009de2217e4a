"""What a bench run is asked for: the steps, where the row goes, and the overrides that make a run a bench run."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..io import paths
from ..io.problems import Problem, ProblemReport

DEFAULT_STEPS = 20
WARMUP_STEPS = 2  # = rocmft.callbacks.metrics.WARMUP_STEPS (not imported: that module needs transformers)
RESULTS_ENV = "ROCMFT_BENCH_RESULTS"


def check_steps(value: Any) -> int:
    """STEPS: a whole number of optimizer steps >= 1 (a ProblemReport, exit 2, otherwise)."""
    try:
        steps = int(str(value).strip())
    except (TypeError, ValueError):
        steps = None
    if steps is None or steps <= 0:
        raise ProblemReport([Problem("", "STEPS", f"must be a whole number of optimizer steps >= 1, got `{value}`",
                                     f"e.g. STEPS={DEFAULT_STEPS}: the first steps are warmup and are not measured")])
    return steps


def results_path(explicit: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Path:
    """--results FILE, else $ROCMFT_BENCH_RESULTS, else results/bench.csv in the project."""
    env = os.environ if env is None else env
    chosen = explicit or env.get(RESULTS_ENV) or paths.root() / "results" / "bench.csv"
    return Path(chosen).expanduser()


def bench_overrides(user: Iterable[str], steps: int, lf: Mapping[str, Any]) -> list[str]:
    """The user's overrides, then the bench's own (which win): fixed steps, no saving, no eval, metrics on."""
    extra = [
        f"max_steps={steps}",
        "save_strategy='no'",  # quoted: bare `no` is YAML false
        "eval_strategy='no'",
        "logging_steps=1",
        "plot_loss=false",
        "env.ROCMFT_METRICS=1",
    ]
    if lf.get("neat_packing"):
        # the attention mask carries segment ids there: count every token of the packed sequences
        extra.append("env.ROCMFT_METRICS_TOKENS=all")
    return [*user, *extra]
