"""`make rm-run RUN=<name>`: remove one run dir of yours from the runs folder, and nothing else.

Named, never `last` (a removal is not undone). Refused: a path that is no run dir directly in the runs folder
(train.yaml, or a canary's canary.json), a link (never followed: what it points to is not the run), another
user's dir (a shared runs folder), a run whose launcher is still running it or whose Slurm job waits to go on.
The tree goes with `shutil.rmtree`, which removes a link inside as a link and stops if the dir is swapped for
one meanwhile (its fd-based walk checks each dir it opens is the one it listed).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ..io import paths
from ..io.problems import Problem, ProblemReport
from . import runs

MARKS = ("train.yaml", "canary.json")  # what makes a folder in runs/ a run dir (a canary's folder holds its verdict)


def remove(spec: str) -> str:
    """Remove the run dir `spec` names; the line that says what went. A ProblemReport says why not."""
    spec = (spec or "").strip()
    if spec in ("", "last"):
        raise ProblemReport([Problem("", "RUN", "name the run to remove: `last` is never removed",
                                     "RUN=<name>: `make runs` lists the runs, `make runs STATE=rendered` the dry runs")])
    base = paths.runs_dir().resolve()
    given = Path(spec)
    path = given if given.is_absolute() or os.sep in spec else base / spec
    path = path.parent.resolve() / path.name  # the folders above it resolved, the run dir itself never followed
    rel = f"{runs.relative(base)}/{path.name}"  # the name asked for, never what a link there points to
    if path.parent != base:
        raise ProblemReport([Problem("", "RUN", f"`{spec}` is not a run in {runs.relative(base)}/",
                                     "RUN=<name> from `make runs`")])
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ProblemReport([Problem("", "RUN", f"no run `{spec}` in {runs.relative(base)}/", "see `make runs`")]) from None
    if stat.S_ISLNK(info.st_mode):
        raise ProblemReport([Problem("", "RUN", f"{rel} is a link: not followed, not removed",
                                     "remove the link itself with rm, if it is yours")])
    if not stat.S_ISDIR(info.st_mode) or not any(_is_file(path / mark) for mark in MARKS):
        raise ProblemReport([Problem("", "RUN", f"{rel} is not a run dir (no {' or '.join(MARKS)})")])
    if info.st_uid != os.getuid():
        raise ProblemReport([Problem("", "RUN", f"{rel} is another user's run: not removed")])
    status = runs.read_status(path)
    if status.get("state") == "running" and runs.alive(status):
        raise ProblemReport([Problem("", "RUN", f"{rel} is running (launcher pid {status.get('launcher_pid', '?')})",
                                     "stop it first (Ctrl-C in its terminal), then remove it")])
    if status.get("state") == "requeued":
        raise ProblemReport([Problem("", "RUN", f"{rel} waits for Slurm job {status.get('job_id', '?')} to go on",
                                     f"scancel {status.get('job_id', '<job id>')} first")])
    size = _size(path)
    shutil.rmtree(path)
    return f"removed {rel} ({status.get('recipe', '?')}, {status.get('state', 'rendered')}, {size / 2**20:.1f} MiB)"


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _size(folder: Path) -> int:
    total = 0
    for top, _dirs, files in os.walk(folder):  # os.walk does not follow links
        for name in files:
            try:
                total += (Path(top) / name).lstat().st_size
            except OSError:
                pass
    return total
