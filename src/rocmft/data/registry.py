"""data/dataset_info.json: read it, and add one entry atomically without touching the others.

The update holds an exclusive lock on the data folder (two `make data` at once cannot lose an entry),
writes a temporary file beside the registry, fsyncs it and renames it over the old one, so a reader
sees the old file or the new one, never half of either. The other entries are written back as they
were read (same keys, same order, same indentation).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from pathlib import Path
from typing import Any

from ..io.problems import Problem, ProblemReport
from .writer import output_mode, temp_beside

FILE_NAME = "dataset_info.json"


def path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def read(data_dir: Path) -> dict[str, Any]:
    """The registry as an ordered dict ({} when the file does not exist yet)."""
    file = path(data_dir)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemReport([Problem(str(file), "", f"cannot read: {exc}")]) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProblemReport([Problem(str(file), "", f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                                     "fix it by hand; rocmft never rewrites a registry it cannot read")]) from None
    if not isinstance(data, dict):
        raise ProblemReport([Problem(str(file), "", "must be a JSON object of dataset entries")])
    return data


def conflict(data_dir: Path, name: str, force: bool) -> list[Problem]:
    """A problem when `name` is registered already and FORCE was not given."""
    if force:
        return []
    existing = read(data_dir).get(name)
    if existing is None:
        return []
    where = existing.get("file_name", "?") if isinstance(existing, dict) else "?"
    return [Problem(str(path(data_dir)), name, f"dataset `{name}` is already registered (file_name {where})",
                    "pick another NAME=, or FORCE=1 to replace it")]


def _indent(text: str) -> str | int:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else 2


@contextlib.contextmanager
def locked(data_dir: Path):
    """An exclusive lock on the data folder itself (no lock file left behind)."""
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomic(target: Path, text: str) -> None:
    """Through a temporary file nobody can guess (`writer.temp_beside`); the registry keeps its permissions."""
    fd, tmp = temp_beside(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), target.stat().st_mode & 0o777 if target.exists() else output_mode(None))
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def register(data_dir: Path, name: str, entry: dict[str, Any], force: bool) -> None:
    """Add or (with force) replace one entry; every other entry is kept as read."""
    with locked(data_dir):
        file = path(data_dir)
        problems = conflict(data_dir, name, force)
        if problems:
            raise ProblemReport(problems)
        data = read(data_dir)
        old_text = file.read_text(encoding="utf-8") if file.exists() else ""
        replacing = name in data
        data[name] = entry
        text = None if replacing else _appended(old_text, name, entry, data)
        if text is None:
            text = json.dumps(data, indent=_indent(old_text), ensure_ascii=False) + "\n"
        write_atomic(file, text)


def _appended(old_text: str, name: str, entry: dict[str, Any], expected: dict[str, Any]) -> str | None:
    """The old text with the entry added before its closing brace, byte for byte the same elsewhere;
    None when that cannot be done safely (the caller then rewrites the whole file)."""
    end = old_text.rstrip().rfind("}")
    if end < 0:
        return None
    head = old_text[:end].rstrip()
    indent = _indent(old_text)
    pad = indent if isinstance(indent, str) else " " * indent
    body = json.dumps(entry, indent=pad, ensure_ascii=False).replace("\n", "\n" + pad)
    sep = "" if head.endswith("{") else ","
    text = f"{head}{sep}\n{pad}{json.dumps(name, ensure_ascii=False)}: {body}\n}}\n"
    try:
        if json.loads(text) != expected or list(json.loads(text)) != list(expected):
            return None
    except json.JSONDecodeError:
        return None
    return text


def unregister(data_dir: Path, name: str) -> bool:
    """Remove one entry (used by tests and to undo); False when it was not there."""
    with locked(data_dir):
        data = read(data_dir)
        if name not in data:
            return False
        old_text = path(data_dir).read_text(encoding="utf-8")
        del data[name]
        write_atomic(path(data_dir), json.dumps(data, indent=_indent(old_text), ensure_ascii=False) + "\n")
        return True
