"""What has been measured on a plan's hardware: the committed rows of results/ (bench.csv, gpu_truth-*.csv).

A plan for hardware with no row there rests on assumptions only (the arch table's utilisation range, host terms
measured on another vendor's card); the plan says so in one line rather than let its figures pass for measured.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from ..io import paths
from .workload import Workload


@cache
def _measured(results: str) -> tuple[frozenset[str], frozenset[str]]:
    """(arches of results/bench.csv, products of results/gpu_truth-*.csv) with a measured row."""
    folder = Path(results)
    arches_seen, products = set(), set()
    bench = folder / "bench.csv"
    if bench.is_file():
        with bench.open(encoding="utf-8") as handle:
            arches_seen = {row.get("arch", "") for row in csv.DictReader(handle) if row.get("arch") not in ("", "cpu")}
    for path in sorted(folder.glob("gpu_truth-*.csv")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
        products |= {row.get("product", "") for row in csv.DictReader(lines) if row.get("status") == "ok"}
    return frozenset(arches_seen), frozenset(products - {""})


def unmeasured(w: Workload) -> str:
    """One line when nothing was measured on the plan's arch or product; "" when something was (or no speed is planned)."""
    if not w.is_gpu or not w.peak_tflops:
        return ""
    arches_seen, products = _measured(str(paths.root() / "results"))
    if w.arch in arches_seen or (w.product and w.product in products):
        return ""
    return (f"not measured: no {w.arch}{' ' + w.product if w.product else ''} row in results/ (bench.csv, gpu_truth-*.csv): "
            f"the utilisation is an assumption ({w.mfu_source}), the host and ZeRO-3 terms were measured on an H200; "
            "`make gpu-truth` or `make bench` on one replaces them")
