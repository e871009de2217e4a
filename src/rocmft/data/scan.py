"""The one pass over the input: every row checked, kept rows written as they came, bad rows sent to the rejects."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from array import array
from collections.abc import Iterable
from functools import partial
from typing import Any

from . import formats
from .formats import BadRow
from .options import Options
from .reader import CHUNK, bounded_lines
from .rowformat import Rows
from .stats import EXACT_BELOW
from .summary import Summary
from .writer import Writer

# A `\u0000` or `\ud800`-`\udfff` escape somewhere in the raw line: rare, so the exact (slow) check of
# the parsed strings runs only when this matches.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
NUL = b"\x00"


class Pass:
    def __init__(self, opts: Options, summary: Summary, writer: Writer | None, rejects: Writer | None,
                 counter: Any, rows: Rows) -> None:
        self.opts, self.summary, self.writer, self.rejects, self.counter, self.rows = opts, summary, writer, rejects, counter, rows
        self.dirty = False  # the kept rows differ from the input bytes: a reject, a blank line, a fixed line ending
        self.write = writer.fh.write if writer is not None and writer.fh is not None else None
        self.reject_write = None
        self.seen: dict[bytes, int] = {}  # a kept row's text (its 128-bit BLAKE2 digest) -> its distinct-row id
        self.groups = array("q")  # per row written, in order: its distinct-row id (what the held-out count splits)

    def repeat(self, data: bytes, lineno: int) -> bool:
        """Count a row that repeats an earlier kept row byte for byte (after line endings are made "\n"); True
        when it is to be dropped (DEDUP=1). Otherwise the row's distinct-row id is recorded in `groups`."""
        key = hashlib.blake2b(data, digest_size=16).digest()
        group = self.seen.get(key)
        if group is None:
            self.seen[key] = group = len(self.seen)
        else:
            self.summary.duplicates += 1
            if not self.summary.first_duplicate:
                self.summary.first_duplicate = lineno
            if self.opts.dedup:
                return True
        self.groups.append(group)
        return False

    def go_dirty(self, offset: int) -> None:
        self.dirty = True
        if self.writer is not None and self.writer.fh is None:
            self.writer.open(offset)  # copies the clean prefix the input had so far
            self.write = self.writer.fh.write

    def reject(self, lineno: int, offset: int, reason: str, detail: str, raw: bytes | None, size: int = 0, obj: Any = None) -> None:
        s = self.summary
        s.rejected[reason] += 1
        s.first_line.setdefault(reason, lineno)
        if self.rejects is None:
            return
        if self.reject_write is None:
            self.rejects.open(0)
            self.reject_write = self.rejects.fh.write
        record: dict[str, Any] = {s.unit: lineno}
        if s.unit == "line":
            record["offset"] = offset  # bytes from the start of the file
        record["reason"], record["detail"] = reason, detail
        if raw is not None:
            body = raw.rstrip(b"\r\n")
            try:
                record["text"] = body.decode("utf-8")
            except UnicodeDecodeError:
                record["text_base64"] = base64.b64encode(body).decode("ascii")
        elif obj is not None:
            record["row"] = obj
        else:
            record["bytes"] = size
        try:
            self.reject_write(json.dumps(record, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
        except UnicodeEncodeError:  # a lone surrogate: keep it escaped
            self.reject_write(json.dumps(record, default=str).encode("ascii") + b"\n")

    def tokens(self, obj: dict) -> None:
        if self.rows.fmt == "text":
            self.count(self.counter.count_text(obj["text"]))
        else:
            self.count(self.counter.count(*formats.TURNS[self.rows.fmt](obj)))

    def count(self, n: int) -> None:
        self.summary.tokens.add(n)
        if self.opts.cutoff_len and n > self.opts.cutoff_len:
            self.summary.over_cutoff += 1

    @staticmethod
    def _parse_slow(text: str) -> Any:
        """json.loads with its error message, for the lines the fast scanner refused (leading
        whitespace, or an error to explain)."""
        try:
            return json.loads(text)
        except ValueError as exc:
            msg, col = getattr(exc, "msg", str(exc)), getattr(exc, "colno", None)
            raise BadRow("invalid_json", f"{msg} at column {col}" if col else msg) from None
        except RecursionError:
            raise BadRow("invalid_json", "nested too deeply to parse") from None

    def jsonl(self, fh, bar) -> None:
        """The hot loop: one iteration per line, as little Python as possible on a good row."""
        s = self.summary
        limit = self.opts.max_line_bytes
        readline = fh.readline
        scan = json.JSONDecoder().scan_once  # the C scanner json.loads ends in, without its two wrappers
        rows = self.rows
        suspect = _SUSPECT_ESCAPE.search
        turns_counts = s.turns.counts
        chars_counts = s.chars.counts
        chars_add = s.chars.add
        counter = self.counter
        repeat = self.repeat
        kept = blank = n = lineno = offset = 0
        nul, esc, lf = NUL, b"\\u", 10
        for line in iter(partial(readline, limit + 1), b""):
            lineno += 1
            size = len(line)
            here = offset
            offset += size
            if size > limit and line[-1] != lf:
                while line[-1:] != b"\n":
                    line = readline(CHUNK)
                    if not line:
                        break
                    size += len(line)
                offset = here + size
                n += 1
                self.go_dirty(here)
                self.reject(lineno, here, "line_too_long", f"{size:,} bytes, over the {limit / (1 << 20):g} MB limit (--max-line-mb)", None, size)
                continue
            if not lineno & 0xFFF and bar is not None:
                bar[0].update(bar[1], completed=offset)
            if line.isspace():
                blank += 1
                self.go_dirty(here)
                continue
            n += 1
            try:
                if nul in line:
                    raise BadRow("nul_byte", f"raw NUL byte at byte {line.index(nul) + 1}")
                try:
                    text = line.decode()
                except UnicodeDecodeError as exc:
                    raise BadRow("invalid_utf8", f"byte {exc.start + 1} (0x{line[exc.start]:02x}) is not UTF-8") from None
                try:
                    obj, end = scan(text, 0)
                except (StopIteration, ValueError):  # not JSON at index 0: explain it, or leading whitespace/BOM
                    if lineno == 1 and text[:1] == "\ufeff":  # a UTF-8 byte order mark: dropped in the copy
                        text, line = text[1:], line[3:]
                        self.go_dirty(here)
                        s.normalized += 1
                    obj = self._parse_slow(text)
                    end = len(text.rstrip())
                except RecursionError:
                    raise BadRow("invalid_json", "nested too deeply to parse") from None
                if end != len(text) - 1 or line[-1] != lf:
                    tail = text[end:]
                    if tail and not tail.isspace():
                        self._parse_slow(text)  # raises "Extra data at column ..."
                    if line[-1] != lf:
                        line += b"\n"  # the last line without a newline: fine in place, completed in a copy
                    elif tail != "\n":
                        self.go_dirty(here)  # CRLF or trailing blanks: the copy gets the JSON and "\n"
                        line = text[:end].encode() + b"\n"
                        s.normalized += 1
                if type(obj) is not dict:
                    raise BadRow("not_an_object", f"the line is a JSON {formats.type_name(obj)}, not an object")
                if esc in line and suspect(line):
                    bad = formats.bad_strings(obj)
                    if bad == "nul_byte":
                        raise BadRow("nul_byte", "a string holds \\u0000")
                    if bad == "invalid_utf8":
                        raise BadRow("invalid_utf8", "a string holds an escaped lone surrogate (\\ud800-\\udfff), which is not valid Unicode")
                n_turns, n_chars = rows(obj, lineno)
            except BadRow as bad:
                self.go_dirty(here)
                self.reject(lineno, here, bad.reason, bad.detail, line)
                continue
            if repeat(line, lineno):
                self.go_dirty(here)
                continue
            if self.write is not None:
                self.write(line)
            kept += 1
            turns_counts[n_turns] += 1
            if n_chars < EXACT_BELOW:
                chars_counts[n_chars] += 1
            else:
                chars_add(n_chars)
            if counter is not None:
                self.tokens(obj)
        s.rows, s.kept, s.blank_lines = n, kept, blank

    def objects(self, items: Iterable[Any], bar, done=None) -> None:
        """The rows of a JSON array or a table (Parquet, CSV), parsed by their reader: each kept row is written
        as one JSONL line. `done()`: how far into the file the reader is, for the progress bar."""
        s = self.summary
        self.go_dirty(0)
        kept = index = 0
        for obj in items:
            index += 1
            if not index & 0xFFF and bar is not None and done is not None:
                bar[0].update(bar[1], completed=done())
            try:
                if type(obj) is not dict:
                    raise BadRow("not_an_object", f"the element is a JSON {formats.type_name(obj)}, not an object")
                bad = formats.bad_strings(obj)
                if bad == "nul_byte":
                    raise BadRow("nul_byte", "a string holds \\u0000")
                if bad == "invalid_utf8":
                    raise BadRow("invalid_utf8", "a string holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode")
                n_turns, n_chars = self.rows(obj, index)
            except BadRow as bad:
                self.reject(index, None, bad.reason, bad.detail, None, obj=obj)
                continue
            # A table's extra column JSON has no type for (a timestamp, bytes) is written as its text: the
            # checked fields are strings by now, and LLaMA-Factory's converter drops the other columns.
            data = json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
            if self.repeat(data, index):
                continue
            if self.write is not None:
                self.write(data)
            kept += 1
            s.normalized += 1
            s.turns.add(n_turns)
            s.chars.add(n_chars)
            if self.counter is not None:
                self.tokens(obj)
        s.rows, s.kept = index, kept

    def text_lines(self, fh, bar) -> None:
        """A .txt file: one document per line, each kept line written as a JSONL row {"text": ...}; blank
        lines are skipped (they separate documents, they are none)."""
        s = self.summary
        limit = self.opts.max_line_bytes
        self.go_dirty(0)
        kept = blank = n = lineno = offset = 0
        for line, size in bounded_lines(fh, limit):
            lineno += 1
            here = offset
            offset += size
            if not lineno & 0xFFF and bar is not None:
                bar[0].update(bar[1], completed=offset)
            if line is None:
                n += 1
                self.reject(lineno, here, "line_too_long", f"{size:,} bytes, over the {limit / (1 << 20):g} MB limit (--max-line-mb)", None, size)
                continue
            body = line.rstrip(b"\r\n")
            if lineno == 1 and body.startswith(b"\xef\xbb\xbf"):
                body = body[3:]
            if not body.strip():
                blank += 1
                continue
            n += 1
            try:
                if NUL in body:
                    raise BadRow("nul_byte", f"raw NUL byte at byte {body.index(NUL) + 1}")
                try:
                    doc = body.decode()
                except UnicodeDecodeError as exc:
                    raise BadRow("invalid_utf8", f"byte {exc.start + 1} (0x{body[exc.start]:02x}) is not UTF-8") from None
            except BadRow as bad:
                self.reject(lineno, here, bad.reason, bad.detail, line)
                continue
            data = json.dumps({"text": doc}, ensure_ascii=False).encode("utf-8") + b"\n"
            if self.repeat(data, lineno):
                continue
            if self.write is not None:
                self.write(data)
            kept += 1
            s.turns.add(1)
            s.chars.add(len(doc))
            if self.counter is not None:
                self.count(self.counter.count_text(doc))
        s.rows, s.kept, s.blank_lines = n, kept, blank
