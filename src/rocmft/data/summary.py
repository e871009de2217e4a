"""What one pass found (rows kept and rejected by reason, lengths, outputs) and the report printed from it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import rel
from .stats import Histogram


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


def report(summary: Summary) -> list[str]:
    s = summary
    out = []
    what = f"{s.fmt}" if s.fmt else "format unknown"
    out.append(f"{rel(s.source)}: {s.rows:,} rows read, {s.kept:,} kept, {s.n_rejected:,} rejected ({what})"
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
        out.append(f"rejects: {rel(s.rejects_path)} (one JSON object per bad row: {s.unit}, offset, reason, detail, text)")
    if s.output:
        how = "registered in place (already clean)" if s.in_place else "written"
        out.append(f"data:    {rel(s.output)} ({how})")
    if s.registry_path:
        out.append(f"registered `{s.name}` in {rel(s.registry_path)} (formatting {s.entry['formatting']}): "
                   f"train on it with SET=\"dataset={s.name}\"")
    return out
