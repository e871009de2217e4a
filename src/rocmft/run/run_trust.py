"""Loading what a run dir holds runs code as you: a pickled checkpoint, a model's remote code. So a run dir
from elsewhere gets a note (RUN=, RESUME=), and `trust_remote_code: true` - in a run's train.yaml for chat,
serve, eval and export, in a recipe for train and bench - is used only when you say so (TRUST_REMOTE_CODE=1),
never silently copied over."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

from ..io import paths
from ..io.problems import Problem
from . import runs

OPT_IN = "TRUST_REMOTE_CODE"


def foreign_notes(run_dir: Path, key: str) -> list[Problem]:
    """A note when the run dir is outside the runs folder or belongs to another user."""
    reasons = []
    try:
        Path(run_dir).resolve().relative_to(paths.runs_dir().resolve())
    except ValueError:
        reasons.append(f"outside {runs.relative(paths.runs_dir())}/")
    owner = Path(run_dir).stat().st_uid
    if owner != os.getuid():
        try:
            name = pwd.getpwuid(owner).pw_name
        except KeyError:
            name = f"uid {owner}"
        reasons.append(f"owned by {name}")
    if not reasons:
        return []
    return [Problem("", key, f"{runs.relative(Path(run_dir))} is {' and '.join(reasons)}: its checkpoint, adapter "
                    "and train.yaml are loaded as you", "use run dirs you trust", severity="note")]


def _refused(train: Mapping, env: Mapping[str, str]) -> bool:
    return train.get("trust_remote_code") is True and env.get(OPT_IN, "").strip().lower() not in ("1", "yes", "true")


def remote_code_allowed(run_path: str, train: Mapping, env: Mapping[str, str]) -> list[Problem]:
    """[] unless the run's train.yaml asks for trust_remote_code and the caller did not opt in."""
    if not _refused(train, env):
        return []
    return [Problem(f"{run_path}/train.yaml", "trust_remote_code",
                    "the run loads its model with trust_remote_code: true, which runs Python code from the "
                    "model's repository as you", f"{OPT_IN}=1 to allow it for this command, if you trust that model")]


def recipe_remote_code(recipe_file: str, llamafactory: Mapping, env: Mapping[str, str]) -> list[Problem]:
    """[] unless the recipe trains with trust_remote_code and the caller did not opt in (train, bench)."""
    if not _refused(llamafactory, env):
        return []
    return [Problem(recipe_file, "llamafactory.trust_remote_code",
                    "the recipe loads its model with trust_remote_code: true, which runs Python code from the "
                    "model's repository as you", f"{OPT_IN}=1 to allow it for this command, if you trust that model")]
