"""The recipe as a file: a header comment naming the source, the project fields that differ from the base, and
the `llamafactory:` block (a `null` says whose default applies). Files are created, never replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from ..io.problems import Problem, ProblemReport
from ..io.safe_text import one_line


def _dump(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


def recipe_text(header: list[str], fields: dict[str, Any], block: dict[str, Any], null_notes: dict[str, str]) -> str:
    """Comments carry the user's values (a model id, a file name) one line each: a newline in one would end the
    comment and write a key of the recipe."""
    lines = [f"# {one_line(line)}" if line else "#" for line in header]
    lines.append(_dump(fields).rstrip("\n"))
    lines.append("llamafactory:")
    for key, value in block.items():
        entry = _dump({key: value}).rstrip("\n").splitlines()
        if value is None and key in null_notes:
            entry[0] = f"{entry[0]:<40} # {one_line(null_notes[key])}"
        lines += [f"  {line}" for line in entry]
    return "\n".join(lines) + "\n"


def ds_text(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, indent=2) + "\n"


def create(path: Path, text: str) -> None:
    """Write a new file; an existing one (even one that appeared a moment ago) is refused, never replaced."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise ProblemReport([Problem("", "TO", f"{path.name} exists: not overwritten", "pick another TO= name")]) from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
