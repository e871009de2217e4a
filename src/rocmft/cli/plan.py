"""`rocmft plan RECIPE [k=v...]`: memory per GPU, verdict, suggestions and expected throughput of a recipe."""

from __future__ import annotations

from ..io.problems import Problem, ProblemReport
from ..recipe import recipes
from .common import add_recipe_arguments, overrides, warn

HELP = "memory per GPU, fits/tight/does not fit, suggestions and expected tokens/s of a recipe (no GPU needed)"


def add_arguments(parser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--arch", default=None, help="plan for another arch of docker/arches.yaml")
    parser.add_argument("--nodes", default=None, help="plan for this many nodes")
    parser.add_argument("--steps", default=None, metavar="N",
                        help="estimate the time of N optimizer steps instead of the dataset's epochs (make plan STEPS=N)")
    parser.add_argument("--price", default=None, help="USD per GPU-hour: GPU-hours and cost of the run (make plan PRICE=)")
    parser.add_argument("--profile", default=None, metavar="reference",
                        help="plan the rows of the reference length profile for the recipe's stage "
                             "(src/rocmft/plan/profiles.json, what plan-all and README quote) instead of its dataset")
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
    if args.profile not in (None, "", "reference"):
        raise ProblemReport([Problem("", "PROFILE", f"unknown length profile `{args.profile}`",
                                     "PROFILE=reference (the rows plan-all and README quote), or leave it unset")])
    recipe = recipes.load(args.recipe, extra)
    result = planner.check(recipe, steps=steps, strict=True, profile=bool(args.profile))
    if args.summary:
        print(result.summary)
    else:
        warn([p for p in result.problems])
        result.problems = []  # printed once, on stderr
        print(result.report())
        print("\n".join(cost_lines(result, getattr(args, "price", None))))
    return 1 if args.check and not result.fits else 0


def cost_lines(result, price_text) -> list[str]:
    """GPU-hours of the planned time and their cost at PRICE=; per million trained tokens at the planned speed."""
    from ..plan import cost

    price = cost.parse_price(price_text)
    tp = result.throughput
    if tp is None or tp.time is None or tp.tokens_per_s_gpu is None or result.workload is None:
        return ["Cost: no planned time for this recipe (no known peak for its arch): GPU-hours unknown"]
    gpus = result.workload.world_size
    fast, slow = (cost.gpu_hours(s, gpus) for s in tp.time.seconds)
    lines = ["Cost", f"  GPU-hours: {cost.hours_text(fast)}-{cost.hours_text(slow)} ({gpus} GPU(s) x the time above)"]
    if price is None:
        lines.append(f"  cost: {cost.ASK}")
        return lines
    lo, hi = tp.tokens_per_s_gpu
    lines.append(f"  cost at ${price:g}/GPU-hour (PRICE=): {cost.money(fast * price)}-{cost.money(slow * price)}; "
                 f"{cost.money(cost.per_million_tokens(price, hi))}-{cost.money(cost.per_million_tokens(price, lo))} "
                 "per million trained tokens")
    return lines
