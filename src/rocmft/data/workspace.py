"""The user's dataset registry (my/data/dataset_info.json) lists the shipped demo entries too.

LLaMA-Factory reads one dataset_dir, so a recipe training `dataset: demo_alpaca,my_data` needs both names in
one registry. The user's registry therefore carries a copy of every shipped entry, its `file_name` pointing
at the shipped file in data/ (relative to the user's folder when it is inside the project, so a moved
checkout still works; absolute otherwise). `make data` refreshes the copies each time it registers: a
shipped entry changed by `git pull` is copied again, one no longer shipped is removed, and an entry the user
registered under a shipped name (FORCE=1) is the user's and stays.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..io import datadirs, paths
from . import registry


def _points_into(entry: Any, folder: Path, shipped: Path) -> bool:
    """Whether a registry entry of `folder` names a file of the shipped data folder (a copy of ours)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file_name"), str):
        return False
    target = Path(os.path.normpath(folder.absolute() / entry["file_name"]))
    return target.is_relative_to(shipped.absolute())


def _copy(entry: dict[str, Any], folder: Path, shipped: Path) -> dict[str, Any]:
    target = shipped.absolute() / entry["file_name"]
    try:
        folder.absolute().relative_to(paths.root())
        inside = True
    except ValueError:
        inside = False
    return {**entry, "file_name": os.path.relpath(target, folder.absolute()) if inside else str(target)}


def refresh(folder: Path) -> bool:
    """Bring the copies of the shipped entries in `folder`'s registry up to date; True when it was rewritten."""
    shipped = paths.root() / datadirs.SHIPPED
    if folder.absolute() == shipped.absolute():
        return False
    ours = {k: v for k, v in registry.read(shipped).items() if isinstance(v, dict) and isinstance(v.get("file_name"), str)}
    with registry.locked(folder):
        current = registry.read(folder)
        updated = {k: v for k, v in current.items() if k in ours or not _points_into(v, folder, shipped)}
        for name, entry in ours.items():
            if name not in current or _points_into(current[name], folder, shipped):
                updated[name] = _copy(entry, folder, shipped)
        if updated == current and list(updated) == list(current):
            return False
        registry.write_atomic(registry.path(folder), json.dumps(updated, indent=2, ensure_ascii=False) + "\n")
        return True
