"""Which run a command means: a run dir, its name under runs/, or `last`.

`last` is the newest run `make train` trained (`made_by: train` in status.json, and launched: a run left
`rendered` never ran): never a canary's, a bench's, a render's or a dry run's, and never another user's. In a
shared runs folder another user's dir (its checkpoint is unpickled by RESUME, its train.yaml loaded by chat) is
never picked for you; named with RUN=/RESUME= it still loads, with a note (run_trust). Whatever `last` picks is
said before the command acts (`pick`'s note), so a wrong pick is seen, not trained on.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..io import paths
from ..io.problems import Problem, ProblemReport
from . import runs


def pick(spec: str, *, key: str = "RUN", recipe: str | None = None) -> tuple[Path, list[Problem]]:
    """(the run dir, a note naming it when `spec` was `last`). `recipe`: `last` among that recipe's runs."""
    spec = (spec or "").strip() or "last"
    if spec != "last":
        for path in (Path(spec), paths.runs_dir() / spec):
            if (path / "train.yaml").is_file():
                return path.resolve(), []
        raise ProblemReport([Problem("", key, f"unknown run `{spec}`: not a run directory (no train.yaml)",
                                     "`make runs` lists them; `last` for the newest training")])
    trained = [r for r in runs.all_runs() if trained_by_make_train(r) and (recipe is None or r.recipe == recipe)
               and _mine(r.path)]
    if not trained:
        of = f" of {recipe}" if recipe else ""
        raise ProblemReport([Problem("", key, f"no training{of} of yours in {runs.relative(paths.runs_dir())} "
                                     "(canaries, benches, renders and dry runs are never `last`)",
                                     "train one first: `make demo` (CPU) or `make train RECIPE=...`; "
                                     "`make runs` lists the runs")])
    newest = max(trained, key=lambda r: (_started(r), r.path.name))
    return newest.path, [Problem("", key, f"last = {describe(newest)}", severity="note")]


def find(spec: str, *, key: str = "RUN", recipe: str | None = None) -> Path:
    return pick(spec, key=key, recipe=recipe)[0]


def trained_by_make_train(run: runs.RunInfo) -> bool:
    return run.made_by == "train" and run.state != "rendered"


def describe(run: runs.RunInfo) -> str:
    """One phrase naming a run: its dir, recipe, how it ended, its steps, when it started."""
    steps = f", {run.last_step}/{run.max_steps or '?'} steps" if run.last_step is not None else ""
    return (f"{runs.relative(run.path)} ({run.recipe} {run.stage}, {run.state}{steps}, started "
            f"{runs.utc_iso(run.started)} UTC)")


def _mine(run_dir: Path) -> bool:
    try:
        return run_dir.stat().st_uid == os.getuid()
    except OSError:
        return False


def _started(run: runs.RunInfo) -> float:
    """When a run began, for `last`. status.json is the job's to write (its container has the run dir), so its
    `started` counts only where the kernel's clock agrees: never later than the dir's last change (ctime, which
    no one can set), give or take a second of clock granularity. A job can make its run look as new as its last
    write, never newer than that."""
    changed = run.path.stat().st_ctime
    started = run.started if isinstance(run.started, (int, float)) and not isinstance(run.started, bool) else None
    return started if started and started <= changed + 1 else changed
