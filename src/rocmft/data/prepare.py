"""`rocmft data`: stream a JSONL file, check every row, keep the good ones, name every bad one, register.

One pass over the input in bounded memory:
- each line is read with a byte limit (a 100 MB line is skipped in 1 MiB pieces, never held whole);
- a good row is written as the bytes it came in (no re-serialising: that is what makes checking every
  field as fast as the posts' json.loads + json.dumps loop);
- a bad row goes to `<name>.rejects.jsonl` with its line number, byte offset, reason and text;
- lengths are counted in histograms, not lists.
Outputs are written to temporary files in the data folder and renamed into place only when the pass
succeeded; the input is opened read-only and never written, moved or replaced.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..problems import Problem, ProblemReport
from . import formats, registry
from .formats import BadRow
from .stats import EXACT_BELOW, Histogram

DEFAULT_MAX_LINE_MB = 16
SAMPLE_ROWS = 1000  # rows read ahead to find the file's format when FORMAT=auto
SAMPLE_BYTES = 8 << 20
PROGRESS_MIN_BYTES = 32 << 20
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
# A `\u0000` or `\ud800`-`\udfff` escape somewhere in the raw line: rare, so the exact (slow) check of
# the parsed strings runs only when this matches.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_CHUNK = 1 << 20
NUL = b"\x00"


@dataclass
class Options:
    source: Path
    name: str | None
    data_dir: Path
    fmt: str = "auto"  # auto | alpaca | sharegpt | messages
    force: bool = False
    check_only: bool = False  # read and report; write and register nothing
    convert: bool = False  # the input is one JSON array of rows
    max_line_bytes: int = DEFAULT_MAX_LINE_MB << 20
    tokenizer: str | None = None
    template: str | None = None
    cutoff_len: int | None = None
    recipe: str | None = None
    progress: bool | None = None  # None: a bar when stderr is a terminal and the file is large


@dataclass
class Summary:
    source: Path
    name: str | None
    fmt: str | None = None
    rows: int = 0  # non-blank lines (or array elements) read
    kept: int = 0
    blank_lines: int = 0
    rejected: Counter = field(default_factory=Counter)
    first_line: dict[str, int] = field(default_factory=dict)
    other_formats: Counter = field(default_factory=Counter)
    turns: Histogram = field(default_factory=Histogram)
    chars: Histogram = field(default_factory=Histogram)
    tokens: Histogram | None = None
    token_how: str = ""
    over_cutoff: int = 0
    cutoff_len: int | None = None
    recipe: str | None = None
    seen_columns: set = field(default_factory=set)
    normalized: int = 0  # lines written differently from how they came (CRLF, BOM, array element)
    output: Path | None = None
    in_place: bool = False
    rejects_path: Path | None = None
    entry: dict[str, Any] | None = None
    registry_path: Path | None = None
    seconds: float = 0.0
    unit: str = "line"

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())


# ---------------------------------------------------------------- checks before reading

def check_name(name: str | None) -> list[Problem]:
    if not name:
        return [Problem("", "NAME", "missing: the name to register the dataset under", "e.g. NAME=my_data")]
    if not NAME_RE.match(name) or ".." in name or name.endswith((".jsonl", ".json")) or name == "dataset_info":
        return [Problem("", "NAME", f"`{name}` is not a usable dataset name",
                        "letters, digits, `_`, `-` and `.` only, starting with a letter or digit, no extension "
                        "(it names the file data/<NAME>.jsonl and the dataset_info.json entry)")]
    return []


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _first_byte(path: Path) -> bytes:
    """The first byte that is not whitespace or a UTF-8 BOM (b'' for an empty or blank file)."""
    with open(path, "rb") as fh:
        head = fh.read(3)
        if head != b"\xef\xbb\xbf":
            fh.seek(0)
        while True:
            chunk = fh.read(65536)
            if not chunk:
                return b""
            stripped = chunk.lstrip()
            if stripped:
                return stripped[:1]


def preflight(opts: Options) -> list[Problem]:
    """Everything that can be refused before the first row is read, all reported together."""
    problems: list[Problem] = []
    src = opts.source
    if not opts.check_only or opts.name:
        problems += check_name(opts.name)
    if not src.exists():
        problems.append(Problem(str(src), "IN", "file not found"))
    elif src.is_dir():
        problems.append(Problem(str(src), "IN", "is a folder, not a file", "give one .jsonl file"))
    elif not os.access(src, os.R_OK):
        problems.append(Problem(str(src), "IN", "cannot be read (permission denied)"))
    elif src.stat().st_size == 0:
        problems.append(Problem(str(src), "IN", "is empty: there are no rows to register"))
    else:
        first = _first_byte(src)
        if first == b"":
            problems.append(Problem(str(src), "IN", "holds only blank lines: there are no rows to register"))
        elif first == b"[" and not opts.convert:
            problems.append(Problem(str(src), "IN", "is a JSON array, not JSONL (one JSON object per line)",
                                    "add CONVERT=1 (rocmft data --convert) to read the array and write it as JSONL "
                                    "to data/<NAME>.jsonl; the original stays as it is"))
        elif first != b"[" and opts.convert:
            problems.append(Problem(str(src), "CONVERT", "the file does not start with `[`: it is not a JSON array",
                                    "drop CONVERT=1 for a JSONL file"))
    if opts.check_only or problems:
        return problems
    data_dir = opts.data_dir
    if data_dir.exists() and not data_dir.is_dir():
        return [Problem(str(data_dir), "DATA_DIR", "is not a folder")]
    out = data_dir / f"{opts.name}.jsonl"
    rejects = data_dir / f"{opts.name}.rejects.jsonl"
    if _same(src, rejects) or _same(src, registry.path(data_dir)):
        problems.append(Problem(str(src), "IN", f"is one of the files this run writes ({rejects.name} or {registry.FILE_NAME})",
                                "copy it elsewhere first or pick another NAME="))
    if out.exists() and not _same(src, out) and not opts.force:
        problems.append(Problem(str(out), "NAME", f"{_rel(out)} exists already and is not IN",
                                "pick another NAME=, or FORCE=1 to replace it"))
    if data_dir.is_dir():
        problems += registry.conflict(data_dir, opts.name, opts.force)
    return problems


# ---------------------------------------------------------------- reading

def _lines(fh, limit: int) -> Iterator[tuple[bytes | None, int]]:
    """(line, size) for each line; (None, size) for a line over `limit` bytes, skipped piece by piece."""
    readline = fh.readline
    for line in iter(partial(readline, limit + 1), b""):
        if len(line) <= limit or line[-1:] == b"\n":
            yield line, len(line)
            continue
        size = len(line)
        while line[-1:] != b"\n":
            line = readline(_CHUNK)
            if not line:
                break
            size += len(line)
        yield None, size


def _array_rows(fh, limit: int) -> Iterator[tuple[Any, int, bytes | None]]:
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
        chunk = fh.read(_CHUNK)
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


# ---------------------------------------------------------------- the pass

class _Writer:
    """A temporary file in the data folder, renamed into place on commit, removed otherwise.
    With `lazy_prefix_of` set, nothing is written until the first row that differs from the input: the
    input's bytes before it are then copied, so a clean file already in data/ costs no write at all."""

    def __init__(self, target: Path, lazy: bool = False, lazy_prefix_of: Path | None = None) -> None:
        self.target = target
        self.tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        self.fh = None
        self.lazy_prefix_of = lazy_prefix_of
        if not lazy and lazy_prefix_of is None:
            self.open(0)

    def open(self, prefix_bytes: int) -> None:
        self.fh = open(self.tmp, "wb", buffering=_CHUNK)
        if prefix_bytes and self.lazy_prefix_of is not None:
            with open(self.lazy_prefix_of, "rb") as src:
                left = prefix_bytes
                while left:
                    chunk = src.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    self.fh.write(chunk)
                    left -= len(chunk)

    def commit(self) -> None:
        if self.fh is not None:
            self.fh.flush()
            os.fsync(self.fh.fileno())
            self.fh.close()
            self.fh = None
            os.replace(self.tmp, self.target)

    def discard(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def _detect_format(opts: Options) -> str | None:
    """The majority format of the first rows (FORMAT=auto), or None when none of them is readable."""
    votes: Counter = Counter()
    read = 0
    if opts.convert:
        with open(opts.source, "rb") as fh:
            try:
                for obj, _, _ in _array_rows(fh, opts.max_line_bytes):
                    if isinstance(obj, dict) and (fmt := formats.detect(obj)):
                        votes[fmt] += 1
                    read += 1
                    if read >= SAMPLE_ROWS:
                        break
            except ProblemReport:
                pass  # the main pass reports it
    else:
        with open(opts.source, "rb") as fh:
            for line, size in _lines(fh, min(opts.max_line_bytes, SAMPLE_BYTES)):
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


def _progress(opts: Options, total: int):
    show = opts.progress if opts.progress is not None else (sys.stderr.isatty() and total >= PROGRESS_MIN_BYTES)
    if not show:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    bar = Progress(TextColumn("checking {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn(), transient=True, console=Console(stderr=True))
    bar.start()
    task = bar.add_task(opts.source.name, total=total)
    return bar, task


class _Rows:
    """Checks one parsed row: its format (fixing the file's format on the first row when FORMAT=auto
    found none in the sample), then the format's own check. Returns (turns, characters) or raises BadRow."""

    def __init__(self, fmt: str | None, explicit: bool, summary: Summary) -> None:
        self.fmt = fmt
        self.check = formats.CHECKS[fmt] if fmt else None
        self.explicit = explicit
        self.summary = summary
        self.columns = formats.Columns()
        self.seen = summary.seen_columns
        self.marker = formats.MARKERS[fmt][0] if fmt else None

    def __call__(self, obj: dict, lineno: int) -> tuple[int, int]:
        if self.marker not in obj or (self.fmt == "alpaca" and formats.detect(obj) != "alpaca"):
            row_fmt = formats.detect(obj)
            if row_fmt != self.fmt:
                if self.fmt is None and row_fmt is not None:
                    self.fmt = self.summary.fmt = row_fmt
                    self.check = formats.CHECKS[row_fmt]
                    self.marker = formats.MARKERS[row_fmt][0]
                elif row_fmt is None:
                    raise BadRow("unknown_format", "no `instruction`/`output` (alpaca), `conversations` (sharegpt) or `messages` key")
                else:
                    self.summary.other_formats[row_fmt] += 1
                    why = f"FORMAT={self.fmt}" if self.explicit else f"most of the file is {self.fmt}"
                    raise BadRow("mixed_format", f"this row is {row_fmt}, {why}")
        return self.check(obj, self.columns, lineno, self.seen)


def run(opts: Options) -> Summary:
    """Check, write, register. Raises ProblemReport for anything that stops the run."""
    problems = preflight(opts)
    if problems:
        raise ProblemReport(problems)
    summary = Summary(source=opts.source, name=opts.name, unit="element" if opts.convert else "line",
                      cutoff_len=opts.cutoff_len, recipe=opts.recipe)
    counter = None
    if opts.tokenizer:
        from .tokens import TokenCounter

        counter = TokenCounter(opts.tokenizer, opts.template)
        summary.tokens = Histogram()
        summary.token_how = counter.how
    explicit = opts.fmt != "auto"
    summary.fmt = opts.fmt if explicit else _detect_format(opts)

    data_dir = opts.data_dir
    writer = rejects = None
    if not opts.check_only:
        in_place_ok = not opts.convert and _inside(opts.source, data_dir) and opts.source.suffix in (".jsonl", ".json")
        data_dir.mkdir(parents=True, exist_ok=True)
        writer = _Writer(data_dir / f"{opts.name}.jsonl", lazy_prefix_of=opts.source if in_place_ok else None)
        rejects = _Writer(data_dir / f"{opts.name}.rejects.jsonl", lazy=True)
    state = _Pass(opts, summary, writer, rejects, counter, _Rows(summary.fmt, explicit, summary))
    started = time.perf_counter()
    bar = _progress(opts, opts.source.stat().st_size)
    try:
        with open(opts.source, "rb", buffering=_CHUNK) as fh:
            if opts.convert:
                state.array(fh, bar)
            else:
                state.jsonl(fh, bar)
    except BaseException:
        if writer is not None:
            writer.discard()
        if rejects is not None:
            rejects.discard()
        raise
    finally:
        if bar is not None:
            bar[0].stop()
    summary.seconds = time.perf_counter() - started
    if opts.check_only:
        return summary
    return _finish(opts, summary, writer, rejects, state.dirty)


class _Pass:
    def __init__(self, opts: Options, summary: Summary, writer: _Writer | None, rejects: _Writer | None,
                 counter: Any, rows: _Rows) -> None:
        self.opts, self.summary, self.writer, self.rejects, self.counter, self.rows = opts, summary, writer, rejects, counter, rows
        self.dirty = False  # the kept rows differ from the input bytes: a reject, a blank line, a fixed line ending
        self.write = writer.fh.write if writer is not None and writer.fh is not None else None
        self.reject_write = None

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
            self.reject_write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        except UnicodeEncodeError:  # a lone surrogate: keep it escaped
            self.reject_write(json.dumps(record).encode("ascii") + b"\n")

    def tokens(self, obj: dict) -> None:
        system, turns = formats.TURNS[self.rows.fmt](obj)
        n = self.counter.count(system, turns)
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
        kept = blank = n = lineno = offset = 0
        nul, esc, lf = NUL, b"\\u", 10
        for line in iter(partial(readline, limit + 1), b""):
            lineno += 1
            size = len(line)
            here = offset
            offset += size
            if size > limit and line[-1] != lf:
                while line[-1:] != b"\n":
                    line = readline(_CHUNK)
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
                    raise BadRow("not_an_object", f"the line is a JSON {formats._type_name(obj)}, not an object")
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

    def array(self, fh, bar) -> None:
        """The rows of one JSON array (CONVERT=1): each kept row is written as one JSONL line."""
        s = self.summary
        total = self.opts.source.stat().st_size
        self.go_dirty(0)
        kept = index = 0
        for obj, here, _ in _array_rows(fh, self.opts.max_line_bytes):
            index += 1
            if not index & 0xFFF and bar is not None:
                bar[0].update(bar[1], completed=min(fh.tell(), total))
            try:
                if type(obj) is not dict:
                    raise BadRow("not_an_object", f"the element is a JSON {formats._type_name(obj)}, not an object")
                bad = formats.bad_strings(obj)
                if bad == "nul_byte":
                    raise BadRow("nul_byte", "a string holds \\u0000")
                if bad == "invalid_utf8":
                    raise BadRow("invalid_utf8", "a string holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode")
                n_turns, n_chars = self.rows(obj, index)
            except BadRow as bad:
                self.reject(index, here, bad.reason, bad.detail, None, obj=obj)
                continue
            if self.write is not None:
                self.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            kept += 1
            s.normalized += 1
            s.turns.add(n_turns)
            s.chars.add(n_chars)
            if self.counter is not None:
                self.tokens(obj)
        s.rows, s.kept = index, kept


def _finish(opts: Options, summary: Summary, writer: _Writer, rejects: _Writer, dirty: bool) -> Summary:
    data_dir = opts.data_dir
    src = opts.source
    out_path = writer.target
    try:
        if summary.rows == 0:
            raise ProblemReport([Problem(str(src), "IN", "holds only blank lines: there are no rows to register")])
        if summary.n_rejected:
            rejects.commit()
            summary.rejects_path = rejects.target
        else:
            rejects.discard()
            with contextlib.suppress(FileNotFoundError):
                rejects.target.unlink()  # a stale rejects file from an earlier run would mislead
        if summary.kept == 0:
            hint = f"see {_rel(rejects.target)} for the line and reason of each"
            if summary.first_line.get("invalid_json") == 1 and _first_line(src).strip() in (b"{", b"{\r"):
                hint = "it looks like one pretty-printed JSON document: JSONL needs one complete object per line; " + hint
            raise ProblemReport([Problem(str(src), "IN", f"no valid rows: all {summary.rows:,} were rejected", hint)])
        same = _same(src, out_path)
        if same or (not dirty and writer.fh is None):
            if dirty:
                fixes = summary.n_rejected + summary.blank_lines + summary.normalized
                raise ProblemReport([Problem(str(src), "IN", f"is {_rel(out_path)} itself and has {fixes:,} lines to drop or fix; "
                                             "it is never modified",
                                             f"register the cleaned copy under another NAME= (the rejects are in {_rel(rejects.target)})")])
            # Clean and already in the data folder: registered where it is, never rewritten.
            summary.in_place = True
            summary.output = out_path if same else src
            file_name = out_path.name if same else os.path.relpath(src.resolve(), data_dir.resolve())
        else:
            writer.commit()
            summary.output = out_path
            file_name = out_path.name
        summary.entry = formats.entry(summary.fmt, file_name, summary.seen_columns)
        registry.register(data_dir, opts.name, summary.entry, opts.force)
        summary.registry_path = registry.path(data_dir)
    finally:
        writer.discard()
        rejects.discard()
    return summary


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.readline(4096)


def _rel(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


# ---------------------------------------------------------------- the report

def report(summary: Summary) -> list[str]:
    s = summary
    out = []
    what = f"{s.fmt}" if s.fmt else "format unknown"
    out.append(f"{_rel(s.source)}: {s.rows:,} rows read, {s.kept:,} kept, {s.n_rejected:,} rejected ({what})"
               + (f", {s.blank_lines:,} blank lines skipped" if s.blank_lines else ""))
    if s.rejected:
        out.append("  rejected by reason:")
        for reason, n in s.rejected.most_common():
            out.append(f"    {reason:<24} {n:>10,}   first at {s.unit} {s.first_line[reason]:,}")
    if s.other_formats:
        fmts = ", ".join(f"{n:,} {f}" for f, n in s.other_formats.most_common())
        out.append(f"  note: {fmts} rows are in another format than {s.fmt}: split them into their own file and "
                   f"register it with its own NAME= (they are in the rejects)")
    if s.kept:
        out.append(f"  turns per row:      {s.turns.line()}")
        out.append(f"  characters per row: {s.chars.line()}")
    if s.tokens is not None and s.kept:
        out.append(f"  tokens per row:     {s.tokens.line()}   ({s.token_how})")
        if s.cutoff_len:
            pct = 100.0 * s.over_cutoff / s.kept
            out.append(f"  {s.over_cutoff:,} rows ({pct:.1f}%) exceed cutoff_len {s.cutoff_len:,}"
                       + (f" of recipe {s.recipe}" if s.recipe else "") + (": they will be truncated" if s.over_cutoff else ""))
    rate = s.rows / s.seconds if s.seconds > 0 else 0
    out.append(f"  {s.seconds:.1f} s, {rate:,.0f} rows/s")
    if s.rejects_path:
        out.append(f"rejects: {_rel(s.rejects_path)} (one JSON object per bad row: {s.unit}, offset, reason, detail, text)")
    if s.output:
        how = "registered in place (already clean)" if s.in_place else "written"
        out.append(f"data:    {_rel(s.output)} ({how})")
    if s.registry_path:
        out.append(f"registered `{s.name}` in {_rel(s.registry_path)} (formatting {s.entry['formatting']}): "
                   f"train on it with SET=\"dataset={s.name}\"")
    return out
