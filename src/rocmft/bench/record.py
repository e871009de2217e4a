"""The bench run dir's bench.json, and the run rebuilt from its files: how `rocmft bench --record` appends
the row of a job that ended after `rocmft bench` returned.

What the run did is read from its files, never from its printed text: metrics.json (the metrics callback)
for the row, and the progress events (progress.jsonl) for whether it ran the steps the bench asked for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..hardware import arches
from ..io import hostio
from ..io.problems import Problem, ProblemReport
from ..run import runs

BENCH_FILE = "bench.json"  # in the run dir: what `rocmft bench --record` needs when the job ends after bench returns


def write_record(run_dir: Path, *, recipe_name: str, recipe_path: str, steps: int, stored_overrides: list[str]) -> None:
    runs.write_json(run_dir / BENCH_FILE, {"recipe": recipe_name, "recipe_path": recipe_path, "steps": steps,
                                           "overrides": stored_overrides, "recorded_in": None})


def read_record(run_dir: Path) -> dict[str, Any]:
    record = hostio.read_json(run_dir / BENCH_FILE)
    if record is None or not isinstance(record.get("overrides", []), list):
        raise ProblemReport([Problem(str(run_dir), "", f"not a bench run: no readable {BENCH_FILE}",
                                     "--record takes a run dir made by `rocmft bench`")]) from None
    steps = record.get("steps")
    problem = steps_problem(run_dir, steps if isinstance(steps, int) else 0)
    if problem:
        raise ProblemReport([problem])
    return record


def steps_problem(run_dir: Path, steps: int) -> Problem | None:
    """A row measures `steps` optimizer steps: a run whose events stop short of them (stopped, or a job still
    running) gives none. No events at all (a job on a cluster volume not visible here): metrics.json decides."""
    from ..run import events

    found = events.read(run_dir)
    if not found or steps <= 0:
        return None
    t = events.totals(found)
    ended = any(e.get("event") == "end" for e in found)
    if ended and (t.last_step or 0) >= steps:
        return None
    what = f"its events end at step {t.last_step or 0} of {steps}" + ("" if ended else ", and training has not ended")
    return Problem(str(run_dir), "", f"the bench run did not complete: {what}",
                   "bench it again (a row is one complete run), or wait for the job to finish")


def mark_recorded(run_dir: Path, results: Path) -> None:
    record = read_record(run_dir)
    record["recorded_in"] = str(results.resolve())
    runs.write_json(run_dir / BENCH_FILE, record)


def prepared_from_run(run_dir: Path, record: Mapping[str, Any]):
    """The run as `pipeline.prepare` had it, from the files in its run dir (not from today's recipe)."""
    import dataclasses

    from .. import pipeline
    from ..recipe import recipes, render

    resolved = run_dir / "recipe.resolved.yaml"
    if not resolved.is_file():
        raise ProblemReport([Problem(str(run_dir), "", "no recipe.resolved.yaml: not a run dir")])
    recipe = recipes.load(str(resolved))
    recipe = dataclasses.replace(recipe, name=str(record["recipe"]), path=str(record.get("recipe_path") or resolved))
    run_path = runs.relative(run_dir)
    rendered = render.render(recipe, run_path)
    return pipeline.Prepared(recipe, arches.get(recipe.arch), rendered, run_dir, run_path, None, None)
