"""`rocmft data`: stream a JSONL file, check every row, keep the good ones, name every bad one, register.

One pass over the input in bounded memory:
- each line is read with a byte limit (a 100 MB line is skipped in 1 MiB pieces, never held whole);
- a good row is written as the bytes it came in (no re-serialising: that is what makes checking every
  field as fast as the posts' json.loads + json.dumps loop);
- a bad row goes to `<name>.rejects.jsonl` with its line number, byte offset, reason and text;
- lengths are counted in histograms, not lists.
Outputs are written to temporary files in the data folder and renamed into place only when the pass
succeeded; the input is opened read-only and never written, moved or replaced.

This module runs the pass and registers its result; preflight, reader, rowformat, scan, writer and summary
hold the parts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from ..io.problems import Problem, ProblemReport
from . import filekind, formats, heldout, kto, registry, workspace
from .files import inside, rel, same_file
from .options import DEFAULT_MAX_LINE_MB, Options
from .preflight import NAME_RE, check_name, preflight
from .reader import CHUNK
from .rowformat import SAMPLE_BYTES, SAMPLE_ROWS, Rows, detect_format, objects
from .scan import NUL, Pass
from .stats import Histogram
from .summary import Summary, report
from .writer import Writer

__all__ = ["DEFAULT_MAX_LINE_MB", "NAME_RE", "NUL", "PROGRESS_MIN_BYTES", "SAMPLE_BYTES", "SAMPLE_ROWS", "Options",
           "Summary", "check_name", "preflight", "report", "run"]

PROGRESS_MIN_BYTES = 32 << 20


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


def run(opts: Options) -> Summary:
    """Check, write, register. Raises ProblemReport for anything that stops the run."""
    problems = preflight(opts)
    if problems:
        raise ProblemReport(problems)
    summary = Summary(source=opts.source, name=opts.name, unit=opts.unit, cutoff_len=opts.cutoff_len,
                      recipe=opts.recipe)
    counter = None
    if opts.tokenizer:
        from .tokens import TokenCounter

        counter = TokenCounter(opts.tokenizer, opts.template)
        summary.tokens = Histogram()
        summary.token_how = counter.how
    explicit = opts.fmt != "auto"
    summary.fmt = "text" if opts.kind == filekind.TEXT else opts.fmt if explicit else detect_format(opts)

    data_dir = opts.data_dir
    writer = rejects = None
    if not opts.check_only:
        in_place_ok = opts.kind == filekind.JSONL and inside(opts.source, data_dir) and opts.source.suffix in (".jsonl", ".json")
        data_dir.mkdir(parents=True, exist_ok=True)
        writer = Writer(data_dir / f"{opts.name}.jsonl", lazy_prefix_of=opts.source if in_place_ok else None,
                        mode_of=opts.source)
        rejects = Writer(data_dir / f"{opts.name}.rejects.jsonl", lazy=True, mode_of=opts.source)
    rows = Rows(summary.fmt, explicit, summary)
    state = Pass(opts, summary, writer, rejects, counter, rows)
    started = time.perf_counter()
    bar = _progress(opts, opts.source.stat().st_size)
    try:
        with open(opts.source, "rb", buffering=CHUNK) as fh:
            if opts.kind == filekind.TEXT:
                state.text_lines(fh, bar)
            elif opts.kind == filekind.JSONL:
                state.jsonl(fh, bar)
            else:
                total = opts.source.stat().st_size  # an array is read from `fh`; a table by pyarrow (no position)
                state.objects(objects(opts, fh), bar, (lambda: min(fh.tell(), total)) if opts.kind == filekind.ARRAY else None)
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
    summary.labels = rows.columns.labels
    summary.dropped_duplicates = summary.duplicates if opts.dedup else 0
    if opts.split is not None and summary.kept:
        summary.held_out = heldout.count(state.groups, opts.split)
    if summary.fmt and formats.kind(summary.fmt) == "kto" and summary.kept:
        summary.set_problem = kto.one_label_only(summary.labels)
    if opts.check_only:
        return summary
    return _finish(opts, summary, writer, rejects, state.dirty)


def _finish(opts: Options, summary: Summary, writer: Writer, rejects: Writer, dirty: bool) -> Summary:
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
            hint = f"see {rel(rejects.target)} for the line and reason of each"
            if summary.first_line.get("invalid_json") == 1 and _first_line(src).strip() in (b"{", b"{\r"):
                hint = "it looks like one pretty-printed JSON document: JSONL needs one complete object per line; " + hint
            raise ProblemReport([Problem(str(src), "IN", f"no valid rows: all {summary.rows:,} were rejected", hint)])
        if summary.set_problem:
            raise ProblemReport([Problem(str(src), "IN", summary.set_problem,
                                         "add rows of the other label, or train these with stage `sft` (the desirable ones)")])
        same = same_file(src, out_path)
        if same or (not dirty and writer.fh is None):
            if dirty:
                fixes = summary.n_rejected + summary.blank_lines + summary.normalized + summary.dropped_duplicates
                raise ProblemReport([Problem(str(src), "IN", f"is {rel(out_path)} itself and has {fixes:,} lines to drop or fix; "
                                             "it is never modified",
                                             f"register the cleaned copy under another NAME= (the rejects are in {rel(rejects.target)})")])
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
        if opts.workspace:
            workspace.refresh(data_dir)
        summary.registry_path = registry.path(data_dir)
    finally:
        writer.discard()
        rejects.discard()
    return summary


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.readline(4096)
