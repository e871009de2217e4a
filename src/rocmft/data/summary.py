"""What one pass found (rows kept and rejected by reason, lengths, outputs) and the report printed from it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..recipe.stages import STAGE_OF_KIND
from . import formats
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
    labels: Counter = field(default_factory=Counter)  # KTO rows kept, by label
    set_problem: str | None = None  # what makes the kept rows as a whole unusable (a KTO set of one label)
    normalized: int = 0  # lines written differently from how they came (CRLF, BOM, array element)
    duplicates: int = 0  # good rows that repeat an earlier good row exactly
    first_duplicate: int = 0  # the line (or element, row) of the first of them
    dropped_duplicates: int = 0  # of them, dropped (DEDUP=1)
    held_out: Any = None  # heldout.HeldOut: the recipe's held-out rows that are copies of training rows
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
    what = s.fmt or "format unknown"
    if s.fmt and formats.kind(s.fmt) != "sft":
        what += f", for `stage: {STAGE_OF_KIND[formats.kind(s.fmt)]}`"
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
    text = s.fmt == "text"
    if s.kept:
        if not text:
            out.append(f"  turns per row:      {s.turns.line()}")
        out.append(f"  characters per row: {s.chars.line()}")
    if s.labels:
        out.append(f"  labels:             {s.labels[True]:,} desirable (true), {s.labels[False]:,} undesirable (false)")
        out += _kto_weights(s.labels[True], s.labels[False])
    if s.set_problem:
        out.append(f"error: {s.set_problem}")
    if s.tokens is not None and s.kept:
        out.append(f"  tokens per row:     {s.tokens.line()}   ({s.token_how})")
        if s.cutoff_len:
            pct = 100.0 * s.over_cutoff / s.kept
            out.append(f"  {s.over_cutoff:,} rows ({pct:.1f}%) exceed cutoff_len {s.cutoff_len:,}"
                       + (f" of recipe {s.recipe}" if s.recipe else "") + (_over(text) if s.over_cutoff else ""))
    out += _duplicates(s)
    rate = s.rows / s.seconds if s.seconds > 0 else 0
    out.append(f"  {s.seconds:.1f} s, {rate:,.0f} rows/s")
    if s.rejects_path:
        out.append(f"rejects: {rel(s.rejects_path)} (one JSON object per bad row: {s.unit}, offset, reason, detail, text)")
    if s.output:
        how = "registered in place (already clean)" if s.in_place else "written"
        out.append(f"data:    {rel(s.output)} ({how})")
    if s.registry_path:
        stage = STAGE_OF_KIND[formats.kind(s.fmt)]
        how = f"formatting {s.entry['formatting']}" if "formatting" in s.entry else "plain text"
        out.append(f"registered `{s.name}` in {rel(s.registry_path)} ({how}"
                   + (", ranking" if s.entry.get("ranking") else "") + f"): train on it with SET=\"dataset={s.name}\""
                   + ("" if stage == "sft" else f" on a `stage: {stage}` recipe"))
    return out


def _duplicates(s: Summary) -> list[str]:
    good = s.kept + s.dropped_duplicates
    if not good:
        return []
    if not s.duplicates:
        line = "  duplicates:         none (no row repeats another exactly)"
    else:
        one = s.duplicates == 1
        share = (f"{s.duplicates:,} row{'' if one else 's'} ({100.0 * s.duplicates / good:.1f}%) repeat{'s' if one else ''} "
                 f"an earlier row exactly (first at {s.unit} {s.first_duplicate:,})")
        line = (f"  duplicates:         {share}: " +
                (f"{s.dropped_duplicates:,} dropped (DEDUP=1)" if s.dropped_duplicates else "kept; DEDUP=1 drops them"))
    out = [line]
    if s.held_out is not None:
        out.append(f"  held out:           {s.held_out.line()}")
    return out


def _over(text: str) -> str:
    if text:
        return ": packed (`packing`, the pt default) they continue in the next block; unpacked they are truncated"
    return ": they will be truncated"


def _kto_weights(desirable: int, undesirable: int) -> list[str]:
    """TRL's KTO rule (trl/trainer/kto_trainer.py): desirable x its weight over undesirable x its weight
    within [1, 4/3]; outside it, the weight of the desirable loss that brings it back (the recipe's
    `kto_chosen_weight`, with `kto_rejected_weight` 1)."""
    if not desirable or not undesirable or 1 <= desirable / undesirable <= 4 / 3:
        return []
    low, high = undesirable / desirable, 4 / 3 * undesirable / desirable
    return [f"  note: {desirable / undesirable:.2f} desirable rows per undesirable one: with kto_rejected_weight 1, "
            f"set kto_chosen_weight between {low:.2f} and {high:.2f} (desirable x weight over undesirable in [1, 4/3])"]
