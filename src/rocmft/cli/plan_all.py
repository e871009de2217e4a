"""`rocmft plan-all`: one line per shipped recipe: hardware, method, memory per GPU, verdict, tokens/s/GPU."""

from __future__ import annotations

from ..io.problems import ProblemReport
from ..recipe import recipes

NAME = "plan-all"
HELP = "a table of every shipped recipe: GiB per GPU against capacity, verdict, expected tokens/s/GPU"


def add_arguments(parser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 when any recipe does not fit")


def run(args) -> int:
    from .. import plan as planner
    from ..plan import report

    rows, notes, failed = [], [], False
    for name in recipes.shipped():
        try:
            recipe = recipes.load(name)
        except ProblemReport as exc:
            rows.append((name, "?", "?", "?", "?", "?", "invalid recipe", "?"))
            notes += [f"{name}: {p.line()}" for p in exc.errors]
            continue
        result = planner.check(recipe, profile=True)
        rows.append(report.table_row(result))
        if result.memory is None:
            notes += [f"{name}: {p.line()}" for p in result.problems if p.severity == "error"]
        elif result.verdict in ("tight", "does not fit") and result.suggestions:
            notes.append(f"{name}: {result.verdict}; {result.suggestions[0].line()}")
        failed = failed or not result.fits
    print(report.table(rows))
    print("\nGiB/GPU: peak estimate against the GPU memory of the arch's product (the arch's first, the host's, or "
          "plan.product; fits < 90% <= tight <= 100% < does not fit); "
          "real tokens/s/GPU: non-padding tokens of the reference length profile for the recipe's stage "
          "(src/rocmft/plan/profiles.json: sft = 999 rows of LLaMA-Factory's alpaca_en_demo, dpo = its 300 dpo_en_demo "
          "pairs, pt = its 300 c4_demo documents; not the demo rows a recipe ships with), at the arch's utilisation "
          "range of its dense peak (docker/arches.yaml `mfu`) unless a recipe sets plan.mfu, with the host's time. "
          "Details: make plan RECIPE=<name> PROFILE=reference")
    for note in notes:
        print(f"  {note}")
    return 1 if args.check and failed else 0
