"""Which format a file is in (the majority of its first rows) and whether each row is in it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..io.problems import ProblemReport
from . import filekind, formats, tables
from .formats import BadRow
from .options import Options
from .reader import array_rows, bounded_lines
from .summary import Summary

SAMPLE_ROWS = 1000  # rows read ahead to find the file's format when FORMAT=auto
SAMPLE_BYTES = 8 << 20


def objects(opts: Options, fh=None) -> Iterator[Any]:
    """The rows of a JSON array or a table, parsed by their reader (the file is opened here without `fh`)."""
    if opts.kind in filekind.TABLES:
        yield from tables.rows(opts.source, opts.kind)
        return
    if fh is None:
        with open(opts.source, "rb") as own:
            yield from objects(opts, own)
        return
    for obj, _, _ in array_rows(fh, opts.max_line_bytes):
        yield obj


def detect_format(opts: Options) -> str | None:
    """The majority format of the first rows (FORMAT=auto), or None when none of them is readable."""
    votes: Counter = Counter()
    read = 0
    if opts.kind in (filekind.ARRAY, *filekind.TABLES):
        try:
            for obj in objects(opts):
                if isinstance(obj, dict) and (fmt := formats.detect(obj)):
                    votes[fmt] += 1
                read += 1
                if read >= SAMPLE_ROWS:
                    break
        except ProblemReport:
            pass  # the main pass reports it
    else:
        with open(opts.source, "rb") as fh:
            for line, size in bounded_lines(fh, min(opts.max_line_bytes, SAMPLE_BYTES)):
                read += size
                if line is not None and not line.isspace():
                    try:
                        obj = json.loads(line.decode("utf-8-sig"))
                    except (ValueError, RecursionError):
                        obj = None
                    if isinstance(obj, dict) and (fmt := formats.detect(obj)):
                        votes[fmt] += 1
                if sum(votes.values()) >= SAMPLE_ROWS or read >= SAMPLE_BYTES:
                    break
    if not votes:
        return None
    best = max(votes.values())
    return next(f for f in formats.FORMATS if votes[f] == best)


class Rows:
    """Checks one parsed row: its format (fixing the file's format on the first row when FORMAT=auto
    found none in the sample), then the format's own check. Returns (turns, characters) or raises BadRow."""

    def __init__(self, fmt: str | None, explicit: bool, summary: Summary) -> None:
        self.fmt = fmt
        self.check = formats.CHECKS[fmt] if fmt else None
        self.explicit = explicit
        self.summary = summary
        self.columns = formats.Columns()
        self.seen = summary.seen_columns
        self.kto_layout = formats.layout(fmt) if fmt and formats.kind(fmt) == "kto" else None

    def __call__(self, obj: dict, lineno: int) -> tuple[int, int]:
        row_fmt = formats.detect(obj)
        if row_fmt != self.fmt:
            if self.fmt is None and row_fmt is not None:
                self.fmt = self.summary.fmt = row_fmt
                self.check = formats.CHECKS[row_fmt]
                self.kto_layout = formats.layout(row_fmt) if formats.kind(row_fmt) == "kto" else None
            elif row_fmt is None:
                raise BadRow("unknown_format", "no `instruction`/`output` (alpaca), `conversations` (sharegpt), "
                                               "`messages` or `text` key")
            elif row_fmt == self.kto_layout:
                pass  # a row of a KTO set without a boolean label: the KTO check says what is wrong with it
            else:
                self.summary.other_formats[row_fmt] += 1
                why = f"FORMAT={self.fmt}" if self.explicit else f"most of the file is {self.fmt}"
                raise BadRow("mixed_format", f"this row is {row_fmt}, {why}")
        return self.check(obj, self.columns, lineno, self.seen)
