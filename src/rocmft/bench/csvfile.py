"""The results CSV file: our header or nothing, rows appended atomically and never rewritten, rows read back."""

from __future__ import annotations

import csv
import fcntl
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..io.problems import Problem, ProblemReport
from .columns import COLUMNS


def _line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


HEADER_LINE = _line(COLUMNS)


def check_results_file(path: Path) -> None:
    """Before a run is spent: the file, if it exists, has our header; its folder can be created."""
    if path.is_dir():
        raise ProblemReport([Problem("", "RESULTS", f"{path} is a directory", "name a .csv file")])
    if path.is_file() and path.stat().st_size > 0:
        with open(path, encoding="utf-8", newline="") as fh:
            first = fh.readline()
        if first.rstrip("\r\n") != HEADER_LINE.rstrip("\n"):
            raise ProblemReport([Problem(str(path), "", "the header is not rocmft's bench columns",
                                         f"append to another file with --results / RESULTS= (columns: {','.join(COLUMNS)})")])


def append_row(path: Path, row: Mapping[str, str]) -> None:
    """Append one row: created with the header when missing; rows already there are never rewritten.

    Atomic against concurrent benches: an exclusive lock, then the whole line in one O_APPEND write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        text = _line(row.get(c, "") for c in COLUMNS)
        if size == 0:
            text = HEADER_LINE + text
        else:
            check_results_file(path)
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    text = "\n" + text  # a hand edit left no final newline: never glue our row onto it
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for every data row; a missing file reads as no rows."""
    if not path.is_file():
        return []
    check_results_file(path)
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return [(reader.line_num, dict(r)) for r in reader if any((v or "").strip() for v in r.values() if isinstance(v, str))]
