"""Bounded reading: JSONL lines with a byte limit, and the rows of one JSON array, streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

from ..io.problems import Problem, ProblemReport

CHUNK = 1 << 20


def bounded_lines(fh, limit: int) -> Iterator[tuple[bytes | None, int]]:
    """(line, size) for each line; (None, size) for a line over `limit` bytes, skipped piece by piece."""
    readline = fh.readline
    for line in iter(partial(readline, limit + 1), b""):
        if len(line) <= limit or line[-1:] == b"\n":
            yield line, len(line)
            continue
        size = len(line)
        while line[-1:] != b"\n":
            line = readline(CHUNK)
            if not line:
                break
            size += len(line)
        yield None, size


def array_rows(fh, limit: int) -> Iterator[tuple[Any, int, bytes | None]]:
    """(row, byte offset, raw text) for each element of a JSON array, streamed; ProblemReport when the
    array itself is broken (we cannot resynchronise inside a malformed array)."""
    import codecs

    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    buf = ""
    pos = 0
    eof = False
    consumed = 0  # characters dropped from the front of buf (for error positions)
    index = 0
    started = False

    def more() -> bool:
        nonlocal buf, pos, eof, consumed
        chunk = fh.read(CHUNK)
        if not chunk:
            eof = True
            buf += utf8.decode(b"", final=True)
            return False
        try:
            text = utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ProblemReport([Problem(str(fh.name), "IN", f"invalid UTF-8 inside the JSON array near byte {fh.tell() - len(chunk) + exc.start}",
                                         "the array cannot be read past this point; fix the bytes or export it again")]) from None
        consumed += pos
        buf = buf[pos:] + text
        pos = 0
        return True

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n\ufeff":
                pos += 1
            if pos < len(buf) or eof or not more():
                return

    def broken(what: str) -> ProblemReport:
        return ProblemReport([Problem(str(fh.name), "IN", f"the JSON array is malformed at character {consumed + pos + 1}: {what}",
                                      f"{index} rows before it were read; fix the file or export it again")])

    skip_ws()
    if pos >= len(buf) or buf[pos] != "[":
        raise broken("expected `[`")
    pos += 1
    while True:
        skip_ws()
        if pos >= len(buf):
            raise broken("the array is not closed with `]`")
        if buf[pos] == "]":
            pos += 1
            skip_ws()
            if pos < len(buf):
                raise broken("text after the closing `]`")
            return
        if started:
            if buf[pos] != ",":
                raise broken("expected `,` or `]` between rows")
            pos += 1
            skip_ws()
        started = True
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                if len(buf) - pos > limit:
                    raise broken(f"a row longer than {limit >> 20} MB") from None
                if eof or not more():
                    raise broken(exc.msg) from None
            except RecursionError:
                raise broken("nested too deeply") from None
        index += 1
        yield obj, consumed + pos, None
        pos = end
