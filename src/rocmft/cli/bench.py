"""`rocmft bench RECIPE [k=v...] --steps N`: run a recipe for N steps with metrics on, append one row to results/bench.csv."""

from __future__ import annotations

import json
import shlex

from .. import bench, pipeline, recipes, runs
from ..problems import Problem, ProblemReport
from . import train
from .common import overrides, warn

HELP = "run RECIPE for a fixed number of steps (saving off) and append one measured row to results/bench.csv"


def add_arguments(parser) -> None:
    train.add_arguments(parser)  # the same recipe, runtime and GPU options as `rocmft train`
    parser.add_argument("--steps", default=str(bench.DEFAULT_STEPS),
                        help=f"optimizer steps to run (default {bench.DEFAULT_STEPS}); the first "
                             f"{bench.WARMUP_STEPS} are warmup, not measured")
    parser.add_argument("--results", default=None,
                        help=f"CSV file to append the row to (default: ${bench.RESULTS_ENV} or results/bench.csv)")


def _plan(prep: pipeline.Prepared, steps: int, args):
    """The planner's result (its FLOPs per token give the MFU); also the `make train` fit check unless --no-plan."""
    try:
        from .. import plan as planner
    except ImportError as exc:
        print(f"note: planner not available ({exc}): MFU will be left empty", flush=True)
        return None
    result = planner.check(prep.recipe, steps=steps)
    if not args.no_plan:
        print(result.summary, flush=True)
        if not result.fits and not args.force:
            raise ProblemReport([Problem(prep.recipe.path, "", "the planner says this run does not fit in GPU memory",
                                         "follow a suggestion above, or FORCE=1 to bench it anyway")])
    return result


def run(args) -> int:
    steps = bench.check_steps(args.steps)
    if args.resume:
        raise ProblemReport([Problem("", "RESUME", "a bench run starts from the recipe's model, never from a checkpoint",
                                     "drop RESUME= (the row would measure a resumed run's first steps as warmup)")])
    results = bench.results_path(args.results)
    bench.check_results_file(results)  # a wrong header is found before a run is spent
    user = overrides(args)
    draft = recipes.load(args.recipe, user)  # for the run name and neat_packing only; prepare re-loads it
    run_name = args.run_name or runs.choose(f"{draft.name}-bench").name
    prep = pipeline.prepare(args.recipe, bench.bench_overrides(user, steps, draft.llamafactory), arch=args.arch,
                            nodes=args.nodes, gpus=args.gpus, run_name=run_name)
    warn(prep.messages)
    if steps <= bench.WARMUP_STEPS:
        print(f"note: STEPS={steps}: the first {max(steps - 1, 0)} step(s) are left out as warmup, so "
              f"{'one step is' if steps > 1 else 'the first step (with its warmup costs) is'} measured; "
              f"use STEPS={bench.DEFAULT_STEPS} for a steadier figure", flush=True)
    runtime = args.runtime or ("docker" if prep.arch.is_gpu else "local")
    if runtime not in train.RUNTIMES:
        raise ProblemReport([Problem("", "RUNTIME", f"unknown runtime `{runtime}`", f"one of: {', '.join(train.RUNTIMES)}")])
    result = _plan(prep, steps, args)
    try:
        module = train._runtime_module(runtime)
    except ImportError as exc:
        raise ProblemReport([Problem("", "RUNTIME", f"runtime `{runtime}` is not available: {exc}")]) from None
    code = module.launch(prep, args)
    if code != 0:
        print(f"[rocmft] bench: the run did not succeed (exit code {code}): no row written", flush=True)
        return code
    metrics_file = prep.run_dir / "metrics.json"
    if not metrics_file.is_file():
        print(f"[rocmft] bench: {runs.relative(metrics_file)} is missing (the metrics callback did not run, or the "
              f"runtime `{runtime}` returned before the job ended): no row written", flush=True)
        return 1
    metrics = json.loads(metrics_file.read_text())
    placed = ("arch", "gpus_per_node", "nodes")  # recorded from the prepared recipe, whatever set them
    stored = [o for o in user if o.partition("=")[0] not in placed]
    stored += [f"arch={prep.recipe.arch}", f"gpus_per_node={prep.recipe.gpus_per_node}", f"nodes={prep.recipe.nodes}"]
    built = bench.build_row(prep, metrics, result, steps=steps, stored_overrides=stored)
    for note in built.notes:
        print(f"note: {note}", flush=True)
    problems = bench.validate_row(built.row)
    if problems:
        print(f"[rocmft] bench: the measured row is not valid, not written (metrics: {runs.relative(metrics_file)}):", flush=True)
        for problem in problems:
            print(f"[rocmft]   {problem}", flush=True)
        return 1
    bench.append_row(results, built.row)
    row = built.row
    memory = "peak RSS" if not prep.arch.is_gpu else "peak memory/GPU"
    print(f"[rocmft] bench: {float(row['tokens_per_s_per_gpu']):,.1f} tokens/s/GPU (non-padding), "
          f"MFU {row['mfu'] or '-'}, {memory} {float(row['peak_mem_gib']):.3f} GiB, "
          f"step p50/p90 {float(row['step_time_p50_s']):.4g}/{float(row['step_time_p90_s']):.4g} s "
          f"({metrics.get('measured_steps')} measured after {metrics.get('warmup_steps')} warmup)", flush=True)
    print(f"[rocmft] row appended to {runs.relative(results)}  (make bench-report to compare with the planner)", flush=True)
    print("[rocmft] row: " + shlex.join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0
