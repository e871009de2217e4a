"""Which dataset registry a run reads: the shipped one (data/dataset_info.json) or the user's (my/data/).

LLaMA-Factory reads one `dataset_dir`. The bases say `dataset_dir: data`, the shipped demo sets; `make data`
registers the user's sets in their own folder (paths.user_data_dir), whose dataset_info.json also lists the
shipped entries, pointing at data/ (data/workspace.py keeps that copy). So a recipe that names a dataset only
the user's registry has is rendered with the user's folder, and the demo sets it may name beside it resolve
there too; every other recipe renders as written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import paths

SHIPPED = "data"  # the bases' dataset_dir, and LLaMA-Factory's default
REGISTRY = "dataset_info.json"


def names(value: Any) -> list[str]:
    """`dataset: a,b` (or a list) -> ["a", "b"]."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(n).strip() for n in items if str(n).strip()]


def registered(folder: Path) -> set[str]:
    """The names in a folder's dataset_info.json (none when it is missing or unreadable: validation says why)."""
    try:
        data = json.loads((folder / REGISTRY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def pick(wanted: Iterable[str], dataset_dir: Any) -> str:
    """The dataset_dir that registers `wanted`: the given one, unless it is the shipped default and a name is
    registered only in the user's folder."""
    if str(dataset_dir or SHIPPED) != SHIPPED:
        return str(dataset_dir)
    missing = [n for n in wanted if n not in registered(paths.root() / SHIPPED)]
    if not missing:
        return str(dataset_dir or SHIPPED)
    user = paths.user_data_dir()
    return paths.shown(user) if set(missing) & registered(user) else str(dataset_dir or SHIPPED)


def resolved(lf: Mapping[str, Any]) -> dict[str, Any]:
    """The LLaMA-Factory block with the dataset_dir that registers its `dataset` and `eval_dataset`."""
    wanted = names(lf.get("dataset")) + names(lf.get("eval_dataset"))
    out = dict(lf)
    if wanted:
        chosen = pick(wanted, lf.get("dataset_dir"))
        if chosen != str(lf.get("dataset_dir") or SHIPPED):
            out["dataset_dir"] = chosen
    return out
