"""Plain text (stage `pt`, continued pretraining): one document per row.

- text (JSONL): {"text": "...", ...}
- a `.txt` file: one document per line (what LLaMA-Factory's own `.txt` datasets hold); `make data` writes
  its lines as JSONL `{"text": ...}` rows, skipping blank lines.

LLaMA-Factory reads it with `columns: {"prompt": "text"}` and no answer column: its pretraining
preprocessing appends EOS to each document and, with `packing` (the default for `pt`), concatenates them
into `cutoff_len` blocks.
"""

from __future__ import annotations

from typing import Any

from .rowcheck import Columns, text

KEY = "text"
KNOWN = frozenset((KEY,))


def check(obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
    chars = text(obj[KEY], f"`{KEY}`")
    if len(obj) > 1:
        columns.extras(obj, KNOWN, line)
    return 1, chars


def document(obj: dict) -> str:
    return obj[KEY]


def entry(file_name: str) -> dict[str, Any]:
    return {"file_name": file_name, "columns": {"prompt": KEY}}
