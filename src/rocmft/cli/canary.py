"""`rocmft canary RECIPE [k=v...]`: train the tiny model a few steps with the recipe's numerics and with an fp32
reference, compare them, and write canary.json (rocmft.canary says what is compared and why).

Each run is a real run of `make train`'s path: `pipeline.prepare` (render + validate), the runtime's launch
(RUNTIME=local: torchrun-free worker process; docker: the arch's image on one GPU), LLaMA-Factory's Trainer;
its steps are read back from the run's progress events. Exit 0 when the numerics agree, 1 when not.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from .. import canary, pipeline, tiny_model
from ..hardware import arches
from ..io import paths
from ..io.problems import Problem, ProblemReport
from ..recipe import recipes
from ..run import events, runs
from . import train
from .common import overrides

HELP = "train the tiny model a few steps with the recipe's numerics and an fp32 reference; agrees / diverges / non-finite"


def add_arguments(parser) -> None:
    train.add_arguments(parser)  # the recipe, runtime and GPU options of `rocmft train` (--dry-run: the runs it would make)
    parser.add_argument("--steps", default=str(canary.STEPS), help=f"optimizer steps per run (default {canary.STEPS})")


def variants(recipe: recipes.Recipe) -> tuple[canary.Numerics, canary.Numerics, list[tuple[str, canary.Numerics, str]]]:
    """(the recipe's numerics, the reference, the bisection steps)."""
    tested = canary.numerics_of(recipe)
    return tested, canary.reference(tested), canary.bisection(tested)


def prepare(args, recipe: recipes.Recipe, tested: canary.Numerics, numerics: canary.Numerics, run_name: str,
            steps: int, *, validate: bool = True) -> pipeline.Prepared:
    """One canary run of `args.recipe` with `numerics`, prepared as `make train` prepares a run (its model built)."""
    from ..validate import where

    dtype, widen = canary.model_for(numerics, tested)
    model, _ = tiny_model.variant(dtype, widen)
    if validate:
        from ..io.problems import raise_if_errors

        raise_if_errors(tiny_model.ensure(model, paths.root(), dtype=dtype, widen=widen, image=_image(recipe)))
    gpus = args.gpus or ("0" if arches.get(recipe.arch).is_gpu else None)  # one GPU of the arch
    return pipeline.prepare(args.recipe, overrides(args) + canary.overrides(recipe, numerics, model, steps=steps),
                            arch=args.arch, gpus=gpus, run_name=run_name, validate=validate,
                            validate_in=where.for_runtime(args.runtime, args), made_by="canary")


def _image(recipe: recipes.Recipe):
    def image():
        from ..validate import where

        place, why = where._local_image(arches.get(recipe.arch, file=recipe.path))
        return (place.ref if place else None), why
    return image


def _run(args, module, prep: pipeline.Prepared) -> tuple[int, list[dict]]:
    code = train.launch(module, prep, args)
    return code, canary.series(events.steps(events.read(prep.run_dir)))


def run(args) -> int:
    from ..validate import where

    try:
        steps = int(args.steps)
    except ValueError:
        steps = 0
    if steps < 1:
        raise ProblemReport([Problem("", "STEPS", f"must be a whole number >= 1, got `{args.steps}`")])
    recipe = recipes.load(args.recipe, overrides(args) + ([f"arch={args.arch}"] if args.arch else []))
    tested, ref, steps_of_bisection = variants(recipe)
    if args.dry_run:
        for label, numerics in (("recipe", tested), ("reference", ref), *((f"{n} -> reference", v) for n, v, _ in steps_of_bisection)):
            dtype, widen = canary.model_for(numerics, tested)
            print(f"{label}: {numerics.describe()}; model {tiny_model.variant(dtype, widen)[0]}")
        return 0
    runtime = args.runtime or where.default_runtime(arches.get(recipe.arch, file=recipe.path))
    try:
        module = train.runtime_module(runtime)
    except ImportError as exc:
        raise ProblemReport([Problem("", "RUNTIME", f"runtime `{runtime}` is not available: {exc}")]) from None
    folder = runs.create(runs.choose(f"{recipe.name}-canary", args.run_name))
    args.quiet, args.no_plan = True, True  # the canary prints one line; the tiny model always fits
    results: dict[str, dict] = {}
    log = folder / "canary.log"  # what the runs' launchers print (run dir, command, summary), kept out of the one line

    def one(label: str, numerics: canary.Numerics) -> dict:
        with open(log, "a") as out, contextlib.redirect_stdout(out):
            prep = prepare(args, recipe, tested, numerics, f"{folder.name}-{label}", steps)
            code, found = _run(args, module, prep)
        results[label] = {"numerics": numerics.__dict__, "run": runs.relative(prep.run_dir), "exit_code": code,
                          "steps": found}
        return results[label]

    base = one("reference", ref)["steps"]
    same = tested == ref
    tested_steps = base if same else one("recipe", tested)["steps"]
    if same:
        results["recipe"] = {**results["reference"], "note": "the recipe's numerics are the reference's: one run"}
    verdict = canary.compare(tested_steps, base, tested.precision, steps)
    found_by = None
    tried = []
    if verdict.verdict in ("diverges", "non-finite", "failed") and len(base) >= steps:
        for name, numerics, set_text in steps_of_bisection:
            if numerics == ref:
                outcome = canary.compare(base, base, numerics.precision, steps)
                tried.append({"change": name, "set": set_text, "verdict": outcome.verdict,
                              "note": "with this change the run is the reference's: not run again"})
            else:
                step_run = one(f"no-{name.lower()}", numerics)
                outcome = canary.compare(step_run["steps"], base, numerics.precision, steps)
                tried.append({"change": name, "set": set_text, "verdict": outcome.verdict, "run": step_run["run"]})
            if outcome.verdict == "agrees":
                found_by = tried[-1]
                break
    record = {
        "recipe": recipe.name, "arch": recipe.arch, "runtime": runtime, "steps": steps,
        "numerics": tested.__dict__, "reference": ref.__dict__, "verdict": verdict.verdict, "detail": verdict.detail,
        "worst": verdict.worst,
        "tolerance": {"unit_roundoff": canary.UNIT_ROUNDOFF[tested.precision], "fp32_reorder": canary.FP32_REORDER,
                      "per_step": [canary.tolerance(tested.precision, k) for k in range(1, steps + 1)],
                      "basis": "relative difference at step k <= 2*k*max(u, 1024*u_fp32): one rounding of each "
                               "operand of a product (2u), compounded by each step's update; u of the recipe's "
                               "precision; fp32 kernels summing in another order get 1024*u_fp32 (the tiny "
                               "model's 1,024-token softmax)"},
        "runs": results, "bisection": tried,
        "restored_by": found_by and {"change": found_by["change"], "set": found_by["set"]},
    }
    target = folder / "canary.json"
    target.write_text(json.dumps(canary.json_safe(record), indent=2) + "\n")
    print(line(record, target), flush=True)
    return 0 if verdict.verdict == "agrees" else 1


def line(record: dict, target: Path) -> str:
    """The one line on screen."""
    head = (f"canary {record['recipe']} ({record['arch']}, {record['steps']} steps, "
            f"{record['numerics']['precision']} vs fp32 reference): {record['verdict']}")
    worst = record.get("worst") or {}
    if record["verdict"] in ("agrees", "diverges") and worst:
        head += f" ({worst['quantity']} step {worst['step']}: {worst['relative']:.2g} vs tolerance {worst['tolerance']:.2g})"
    elif record["detail"]:
        head += f" ({record['detail']})"
    if record["verdict"] != "agrees":
        fix = record.get("restored_by")
        head += (f"; {fix['change']} restores agreement: SET=\"{fix['set']}\"" if fix
                 else "; no single change (Liger off, SDPA, fp32) restores agreement")
    return f"{head} -> {runs.relative(target)}"
