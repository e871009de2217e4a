"""`rocmft bench RECIPE [k=v...] --steps N`: run a recipe for N steps with metrics on, append one row to results/bench.csv.

`rocmft bench RUN_DIR --record`: append the row of a bench run that finished after `rocmft bench` returned
(RUNTIME=k8s renders the job for kubectl; Slurm with --no-submit).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from .. import bench, pipeline
from ..io import hostio
from ..io.problems import Problem, ProblemReport
from ..launch import tuning
from ..recipe import recipes
from ..run import pick, runs
from ..run.jobfiles import METRICS
from . import train
from .common import overrides, warn

HELP = "run RECIPE for a fixed number of steps (saving off) and append one measured row to results/bench.csv"
ASYNC_RUNTIMES = ("k8s",)  # return once the job is rendered; the row is recorded with --record afterwards


def add_arguments(parser) -> None:
    train.add_arguments(parser)  # the same recipe, runtime and GPU options as `rocmft train`
    parser.add_argument("--steps", default=str(bench.DEFAULT_STEPS),
                        help=f"optimizer steps to run (default {bench.DEFAULT_STEPS}); the first "
                             f"{bench.WARMUP_STEPS} are warmup, not measured")
    parser.add_argument("--results", default=None,
                        help=f"CSV file to append the row to (default: ${bench.RESULTS_ENV} or results/bench.csv)")
    parser.add_argument("--price", default=None, help="USD per GPU-hour: the run's measured GPU-hours and cost (PRICE=)")
    parser.add_argument("--record", action="store_true",
                        help="RECIPE is a finished bench run dir (or `last`): append its row without running anything")


def _plan(prep: pipeline.Prepared, steps: int, args, *, check_fit: bool):
    """The planner's result (its FLOPs per token give the MFU); also the `make train` fit check unless --no-plan."""
    try:
        from .. import plan as planner
    except ImportError as exc:
        print(f"note: planner not available ({exc}): MFU will be left empty", flush=True)
        return None
    result = planner.check(prep.recipe, steps=steps)
    if check_fit and not args.no_plan:
        print(result.summary, flush=True)
        if not result.fits and not args.force:
            raise ProblemReport([Problem(prep.recipe.path, "", "the planner says this run does not fit in GPU memory",
                                         "follow a suggestion above, or FORCE=1 to bench it anyway")])
    return result


def money_line(run_dir: Path, tokens_per_s_per_gpu: float, price_text) -> str:
    """The run's measured GPU-hours (wall time x GPUs) and, at PRICE=, its cost and cost per million trained tokens."""
    from ..plan import cost
    from .runs import gpus_of

    status = runs.read_status(run_dir)
    started, ended, gpus = status.get("started"), status.get("ended"), gpus_of(run_dir)
    if not (started and ended and gpus):
        return "GPU-hours: unknown (no start/end or launch plan recorded)"
    hours = cost.gpu_hours(ended - started, gpus)
    text = f"measured {cost.hours_text(hours)} GPU-hours ({gpus} GPU(s) x {ended - started:.0f} s, setup included)"
    price = cost.parse_price(price_text)
    if price is None:
        return f"{text}; cost: {cost.ASK}"
    return (f"{text}: {cost.money(hours * price)} at ${price:g}/GPU-hour; "
            f"{cost.money(cost.per_million_tokens(price, tokens_per_s_per_gpu))} per million trained tokens at the measured speed")


def _append(prep: pipeline.Prepared, run_dir: Path, result, results: Path, record: dict, args=None) -> int:
    metrics_file = runs.job_file(run_dir, METRICS)
    metrics = hostio.read_json(metrics_file)  # the job's file: data to check, not to trust
    if metrics is None:
        state = runs.read_status(run_dir).get("state", "not started")
        print(f"[rocmft] bench: {runs.relative(metrics_file)} is missing or not a JSON object (run state: {state}; "
              "the metrics callback writes it when training ends): no row written", flush=True)
        return 1
    try:
        built = bench.build_row(prep, metrics, result, steps=int(record["steps"]), stored_overrides=list(record["overrides"]))
    except (KeyError, TypeError, ValueError) as exc:
        print(f"[rocmft] bench: {runs.relative(metrics_file)} is not what the metrics callback writes ({exc!r}): "
              "no row written", flush=True)
        return 1
    for note in built.notes:
        print(f"note: {note}", flush=True)
    problems = bench.validate_row(built.row)
    if problems:
        print(f"[rocmft] bench: the measured row is not valid, not written (metrics: {runs.relative(metrics_file)}):", flush=True)
        for problem in problems:
            print(f"[rocmft]   {problem}", flush=True)
        return 1
    bench.append_row(results, built.row)
    bench.mark_recorded(run_dir, results)
    row = built.row
    memory = "peak memory/GPU" if prep.arch.is_gpu else "peak RSS"
    print(f"[rocmft] bench: {float(row['tokens_per_s_per_gpu']):,.1f} tokens/s/GPU (non-padding), "
          f"MFU {row['mfu'] or '-'}, {memory} {float(row['peak_mem_gib']):.3f} GiB, "
          f"step p50/p90 {float(row['step_time_p50_s']):.4g}/{float(row['step_time_p90_s']):.4g} s "
          f"({metrics.get('measured_steps')} measured after {metrics.get('warmup_steps')} warmup)", flush=True)
    print(f"[rocmft] row appended to {runs.relative(results)}  (make bench-report to compare with the planner)", flush=True)
    print(f"[rocmft] {money_line(run_dir, float(row['tokens_per_s_per_gpu']), getattr(args, 'price', None))}", flush=True)
    print(f"[rocmft] GEMMs: {tuning.state_of(record['overrides'])} (TUNE=1 tunes once per image and shape, then reuses; "
          "compare rows with and without it)", flush=True)
    print("[rocmft] row: " + shlex.join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


def _record(args, results: Path) -> int:
    run_dir = pick.find(args.recipe)
    record = bench.read_record(run_dir)
    if record.get("recorded_in"):
        raise ProblemReport([Problem(str(run_dir), "", f"already recorded in {record['recorded_in']}",
                                     "a run gives one row; bench again for another")])
    prep = bench.prepared_from_run(run_dir, record)
    return _append(prep, run_dir, _plan(prep, int(record["steps"]), args, check_fit=False), results, record, args)


def run(args) -> int:
    steps = bench.check_steps(args.steps)
    from ..plan import cost

    cost.parse_price(getattr(args, "price", None))  # a bad PRICE is found before a run is spent
    if args.resume:
        raise ProblemReport([Problem("", "RESUME", "a bench run starts from the recipe's model, never from a checkpoint",
                                     "drop RESUME= (the row would measure a resumed run's first steps as warmup)")])
    results = bench.results_path(args.results)
    bench.check_results_file(results)  # a wrong header is found before a run is spent
    if args.record:
        return _record(args, results)
    user = overrides(args)
    user += train.tune_overrides(args, user)  # TUNE=1: kept in the row's overrides (tuning | tuned | untuned)
    draft = recipes.load(args.recipe, user)  # for the run name and neat_packing only; prepare re-loads it
    run_name = args.run_name or runs.choose(f"{draft.name}-bench").name
    from ..validate import where

    if args.runtime and args.runtime not in train.RUNTIMES:
        raise ProblemReport([Problem("", "RUNTIME", f"unknown runtime `{args.runtime}`", f"one of: {', '.join(train.RUNTIMES)}")])
    prep = pipeline.prepare(args.recipe, bench.bench_overrides(user, steps, draft.llamafactory), arch=args.arch,
                            nodes=args.nodes, gpus=args.gpus, run_name=run_name,
                            validate_in=where.for_runtime(args.runtime, args), need_model=args.runtime != "k8s", job=True,
                            made_by="bench")
    warn(prep.messages)
    if steps <= bench.WARMUP_STEPS:
        print(f"note: STEPS={steps}: the first {max(steps - 1, 0)} step(s) are left out as warmup, so "
              f"{'one step is' if steps > 1 else 'the first step (with its warmup costs) is'} measured; "
              f"use STEPS={bench.DEFAULT_STEPS} for a steadier figure", flush=True)
    runtime = args.runtime or where.default_runtime(prep.arch)
    if runtime == "slurm":
        args.wait = True  # sbatch --wait: the row is written when the job has ended
    result = _plan(prep, steps, args, check_fit=True)
    try:
        module = train.runtime_module(runtime)
    except ImportError as exc:
        raise ProblemReport([Problem("", "RUNTIME", f"runtime `{runtime}` is not available: {exc}")]) from None
    placed = ("arch", "gpus_per_node", "nodes")  # recorded from the prepared recipe, whatever set them
    stored = [o for o in user if o.partition("=")[0] not in placed]
    stored += [f"arch={prep.recipe.arch}", f"gpus_per_node={prep.recipe.gpus_per_node}", f"nodes={prep.recipe.nodes}"]
    code = train.launch(module, prep, args)  # the runtime's warnings printed as for `make train`
    if prep.run_dir.is_dir():
        bench.write_record(prep.run_dir, recipe_name=prep.recipe.name,
                           recipe_path=prep.recipe.path, steps=steps, stored_overrides=stored)
    if code != 0:
        print(f"[rocmft] bench: the run did not succeed (exit code {code}): no row written", flush=True)
        return code
    if not runs.job_file(prep.run_dir, METRICS).is_file() and (runtime in ASYNC_RUNTIMES or not getattr(args, "submit", True)):
        rel = runs.relative(prep.run_dir)
        print(f"[rocmft] bench: the job runs outside this command; when it has finished, append its row with:\n"
              f"  rocmft bench {rel} --record{' --results ' + shlex.quote(str(results)) if args.results else ''}", flush=True)
        return 0
    return _append(prep, prep.run_dir, result, results, bench.read_record(prep.run_dir), args)
