"""`rocmft bench-report`: the bench rows, the planner's prediction beside each (error in %), and a small plot."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import bench
from ..run import runs

NAME = "bench-report"
HELP = "print results/bench.csv with the planner's prediction (memory, tokens/s) beside each row, and plot it"


def add_arguments(parser) -> None:
    parser.add_argument("--results", default=None,
                        help=f"CSV file to read (default: ${bench.RESULTS_ENV} or results/bench.csv)")
    parser.add_argument("--plot", default=None, help="PNG to write (default: results/bench.png next to the CSV)")
    parser.add_argument("--no-plot", action="store_true", help="print the table only")


def run(args) -> int:
    results = bench.results_path(args.results)
    rows = bench.read_rows(results)
    if not rows:
        print(f"no bench rows in {runs.relative(results)}: run `make bench RECIPE=<recipe>` first "
              "(docs/bench.md says how to contribute a row from real AMD hardware)")
        return 0
    valid, invalid = [], []
    for line, row in rows:
        problems = bench.validate_row(row)
        (invalid if problems else valid).append((line, row, problems))
    lines = bench.compare([(line, row) for line, row, _ in valid])
    print(f"{len(valid)} row(s) from {runs.relative(results)}; pred = the planner now, for the row's recipe and overrides; "
          "err = (pred - measured) / measured")
    print(bench.render_table(lines))
    notes = bench.render_notes(lines)
    if any(not r.mem_comparable for r in lines):
        notes.append("rss: a CPU row's memory is the peak RSS of the training process (Python, torch, data), "
                     "not comparable (n/c) with the planner's GPU-memory model")
    if notes:
        print()
        for note in notes:
            print(f"note: {note}")
    for line, row, problems in invalid:
        print(f"warning: {runs.relative(results)} line {line}: row left out: {'; '.join(problems)}", file=sys.stderr)
    if not args.no_plot and lines:
        out = Path(args.plot) if args.plot else (results.parent / "bench.png")
        try:
            bench.plot(lines, out)
            print(f"\nplot: {runs.relative(out)}")
        except ImportError as exc:
            print(f"note: no plot ({exc}: install matplotlib, or pass --no-plot)", file=sys.stderr)
    return 0
