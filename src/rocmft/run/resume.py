"""RESUME=: a new run that goes on from an interrupted one's newest complete checkpoint, as that run was asked.

The interrupted run's resolved recipe (its recipe.resolved.yaml: the dataset, the step count, every SET= it
was given, a FROM= start) is the resumed run's, except for the keys the user sets again; each of those that
differs is said, and so is what is kept that the recipe file says otherwise. A resumed run thus trains the same
data for the same steps whatever the recipe file says today, and a changed key is never a surprise.

A checkpoint already at or past the run's max_steps is refused before anything starts: the Trainer would
train nothing and end as if it had succeeded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..io.problems import Problem, ProblemReport
from ..recipe.overrides import parse_overrides
from ..recipe.recipes import PROJECT_KEYS, Recipe
from . import runs
from .checkpoints import newest_complete

_MISSING = object()
# What a run dir's resolved recipe holds that is no setting of the run (`make copy` rewrites a description).
NOT_CARRIED = ("description",)


def checkpoint(run_dir: Path) -> tuple[Path, list[Problem]]:
    """The run's newest complete checkpoint, and a warning for each newer one that is not."""
    found, skipped = newest_complete(runs.job_dir(run_dir))
    warnings = [Problem("", "RESUME", f"{runs.relative(s.path)} is incomplete ({s.why}): skipped", severity="warning")
                for s in skipped]
    if found is None:
        raise ProblemReport(warnings + [Problem("", "RESUME", f"{runs.relative(run_dir)} has no complete checkpoint to resume from",
                                                "checkpoints are written every `save_steps` steps into output/checkpoint-N")])
    return found, warnings


def recipe_problems(run_dir: Path, recipe_name: str) -> list[Problem]:
    """A run resumes with its own recipe: RECIPE= naming another one would be asked for and silently not used."""
    trained = runs.read_status(run_dir).get("recipe")
    if not trained or trained == recipe_name:
        return []
    return [Problem("", "RESUME", f"{runs.relative(run_dir)} trained recipe `{trained}`, not `{recipe_name}`",
                    f"RECIPE={trained} RESUME=...; to start {recipe_name} from that run's adapter: FROM=")]


def started_from(run_dir: Path) -> str | None:
    """What the interrupted run was started FROM (its status.json), so the resumed run starts there too."""
    return runs.read_status(run_dir).get("from_spec")


def carried(run_dir: Path, current: Recipe, asked: list[str]) -> tuple[list[str], list[Problem]]:
    """(overrides that give `current` the interrupted run's settings, except for the keys in `asked`; a note
    per key `asked` changes from the interrupted run, and one naming what is kept against the recipe file)."""
    rel = runs.relative(run_dir)
    try:
        before = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ProblemReport([Problem(f"{rel}/recipe.resolved.yaml", "", f"cannot read the interrupted run's recipe: {exc}",
                                     "RESUME= continues a run as it was asked; without that file, start it anew")]) from None
    if not isinstance(before, dict):
        raise ProblemReport([Problem(f"{rel}/recipe.resolved.yaml", "", "is not a mapping of recipe keys")])
    mine = [".".join(path) for path, _ in parse_overrides(asked, PROJECT_KEYS)]
    kept, changed = [], []
    for key, old, new in _differences(before, current.to_dict()):
        if key.split(".")[0] in NOT_CARRIED:
            continue
        if any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in mine):
            changed.append(Problem("", "RESUME", f"{key}: {_text(old)} in {rel} -> {_text(new)} now (set on this "
                                   "command line)", severity="note"))
        else:
            kept.append((key, old, new))
    overrides = [f"{key}={'' if old is _MISSING else json.dumps(old)}" for key, old, _ in kept]
    said = [Problem("", "RESUME", f"{rel}'s recipe is reused: "
                    + ("; ".join(f"{key}={_text(old)} (recipe file: {_text(new)})" for key, old, new in kept)
                       if kept else "the recipe file says the same") + "; SET= a key to change it", severity="note")]
    return overrides, said + changed


def past_end(found: Path, recipe: Recipe) -> list[Problem]:
    """A checkpoint at or past max_steps leaves nothing to train: refused, with the step count that would."""
    step = int(found.name.split("-")[1])
    max_steps = recipe.llamafactory.get("max_steps")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0 or step < max_steps:
        return []
    return [Problem(runs.relative(Path(recipe.path)), "llamafactory.max_steps",
                    f"{max_steps}, but RESUME starts at step {step} ({runs.relative(found)}): nothing left to train",
                    f'SET="max_steps=N" with N > {step}')]


def _differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, old value, new value) of every leaf that differs; a mapping on one side only is one leaf."""
    found = []
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key, _MISSING), new.get(key, _MISSING)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found


def _text(value: Any) -> str:
    return "(not set)" if value is _MISSING else json.dumps(value)
