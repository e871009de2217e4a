"""`rocmft rm-run RUN`: remove one of your run dirs from the runs folder (run/remove.py says what is refused)."""

from __future__ import annotations

NAME = "rm-run"
HELP = "remove one of your runs (a dry run, a canary, a failed try) from the runs folder: RUN=<name>, never `last`"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="", help="the run's name under runs/ (or its path there)")


def run(args) -> int:
    from ..run import remove

    print(f"[rocmft] {remove.remove(args.run)}", flush=True)
    return 0
