"""`rocmft list`: the shipped recipes, then the user's own (my/recipes/), one line each."""

from __future__ import annotations

from ..io.problems import ProblemReport
from ..recipe import recipes

HELP = "list the recipes with arch, GPUs and a one-line description"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    rows = []
    mine = set(recipes.available()) - set(recipes.shipped())
    for name in recipes.available():
        path = recipes.find(name)
        try:
            r = recipes.load(name)
            where = f"{r.arch} x{r.gpus_per_node}" + (f" x{r.nodes} nodes" if r.nodes > 1 else "")
            method = f"{r.llamafactory.get('finetuning_type', '?')}, {r.deepspeed}"
        except ProblemReport:
            where, method = "INVALID", "run `make validate`"
        rows.append((name, where, method, ("(yours) " if name in mine else "") + recipes.header_comment(path)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    return 0
