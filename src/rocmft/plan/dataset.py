"""How many training samples a recipe's datasets hold, counted from the local files LLaMA-Factory would read.

`dataset: a,b` names entries of `<dataset_dir>/dataset_info.json`; an entry with `file_name` is a local file
(or folder) whose rows are counted here: .jsonl/.csv by lines, .json by its list length. Hub datasets and
binary formats (parquet, arrow) are not opened: their size is unknown and the time estimate says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io import paths


@dataclass(frozen=True)
class DatasetSize:
    names: tuple[str, ...]
    rows: int | None  # training rows after max_samples and val_size; None when any part is unknown
    notes: tuple[str, ...] = field(default_factory=tuple)


def _count_file(path: Path) -> int | None:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".csv", ".txt", ".tsv"):
        with path.open("rb") as handle:
            lines = sum(1 for line in handle if line.strip())
        return max(lines - 1, 0) if suffix in (".csv", ".tsv") else lines
    if suffix == ".json":
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            return sum(1 for line in text.splitlines() if line.strip())  # JSON lines named .json
        if isinstance(data, list):
            return len(data)
        return 1 if isinstance(data, dict) else None
    return None


def _count(path: Path) -> int | None:
    if path.is_file():
        return _count_file(path)
    if path.is_dir():
        total = 0
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        for file in files:
            n = _count_file(file)
            if n is None:
                return None
            total += n
        return total
    return None


def count(lf: Mapping[str, Any]) -> DatasetSize:
    """Training rows for the LLaMA-Factory arguments `lf` (dataset, dataset_dir, max_samples, val_size)."""
    names = tuple(n.strip() for n in str(lf.get("dataset") or "").split(",") if n.strip())
    if not names:
        return DatasetSize((), None, ("no `dataset` set",))
    folder = Path(str(lf.get("dataset_dir") or "data"))
    if not folder.is_absolute():
        folder = paths.root() / folder
    info_file = folder / "dataset_info.json"
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DatasetSize(names, None, (f"{info_file} not readable: dataset size unknown",))
    max_samples = lf.get("max_samples")
    total = 0
    notes: list[str] = []
    for name in names:
        entry = info.get(name)
        if not isinstance(entry, dict):
            return DatasetSize(names, None, (f"`{name}` is not in {info_file.name}: size unknown",))
        if not entry.get("file_name"):
            return DatasetSize(names, None, (f"`{name}` is a hub dataset: size unknown until it is downloaded",))
        path = folder / str(entry["file_name"])
        rows = _count(path)
        if rows is None:
            return DatasetSize(names, None, (f"`{name}`: cannot count rows of {path} (missing or binary)",))
        if isinstance(max_samples, int) and max_samples > 0 and rows > max_samples:
            notes.append(f"`{name}` capped at max_samples={max_samples} (of {rows})")
            rows = max_samples
        total += rows
    val = lf.get("val_size") or 0
    if isinstance(val, (int, float)) and val > 0:
        held = round(total * val) if val < 1 else int(val)
        notes.append(f"{held} rows held out by val_size={val}")
        total = max(total - held, 0)
    return DatasetSize(names, total, tuple(notes))
