"""`rocmft plan RECIPE [k=v...]`: memory per GPU, verdict, suggestions and expected throughput of a recipe."""

from __future__ import annotations

from .. import recipes
from ..problems import Problem, ProblemReport
from .common import add_recipe_arguments, overrides, warn

HELP = "memory per GPU, fits/tight/does not fit, suggestions and expected tokens/s of a recipe (no GPU needed)"


def add_arguments(parser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--arch", default=None, help="plan for another arch of docker/arches.yaml")
    parser.add_argument("--nodes", default=None, help="plan for this many nodes")
    parser.add_argument("--steps", default=None, metavar="N",
                        help="estimate the time of N optimizer steps instead of the dataset's epochs (make plan STEPS=N)")
    parser.add_argument("--summary", action="store_true", help="print the few-line summary `make train` shows")
    parser.add_argument("--check", action="store_true", help="exit 1 when the plan says it does not fit")


def parse_steps(value) -> int | None:
    if value is None or str(value).strip() == "":
        return None
    try:
        steps = int(str(value))
    except ValueError:
        steps = 0
    if steps <= 0:
        raise ProblemReport([Problem("", "STEPS", f"must be a whole number of optimizer steps > 0, got `{value}`",
                                     "leave STEPS unset to plan the recipe's epochs")])
    return steps


def run(args) -> int:
    from .. import plan as planner  # after argument parsing: `rocmft --help` stays fast

    steps = parse_steps(args.steps)
    extra = overrides(args)
    if args.arch:
        extra.append(f"arch={args.arch}")
    if args.nodes:
        extra.append(f"nodes={args.nodes}")
    recipe = recipes.load(args.recipe, extra)
    result = planner.check(recipe, steps=steps, strict=True)
    if args.summary:
        print(result.summary)
    else:
        warn([p for p in result.problems])
        result.problems = []  # printed once, on stderr
        print(result.report())
    return 1 if args.check and not result.fits else 0
