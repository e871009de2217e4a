"""The dataset formats `make data` knows: a kind (what the rows teach) in a layout (how they are written).

    kind        stage it trains   layouts (format names)                                  module
    sft         sft               alpaca, sharegpt, messages                              sft.py
    preference  dpo (and rm)      alpaca-preference, sharegpt-preference, messages-preference   preference.py
    kto         kto               alpaca-kto, sharegpt-kto, messages-kto                  kto.py
    text        pt                text (JSONL {"text"}; a .txt file is read as one)       text.py

This module is the table: how a row's format is recognised, which check and which dataset_info.json entry
each format has, and every reason a row can be rejected for.
"""

from __future__ import annotations

from typing import Any

from . import kto, preference, sft, text
from .rowcheck import BadRow, Columns, bad_strings, type_name

__all__ = ["BadRow", "Columns", "bad_strings", "type_name", "FORMATS", "KINDS", "REASONS", "CHECKS", "TURNS",
           "detect", "kind", "layout", "entry"]

LAYOUTS = ("alpaca", "sharegpt", "messages")
FORMATS = (*LAYOUTS, *(f"{x}-preference" for x in LAYOUTS), *(f"{x}-kto" for x in LAYOUTS), "text")
KINDS = ("sft", "preference", "kto", "text")

# Why a row was rejected: the reason names written to the rejects file and counted in the summary.
REASONS = {
    "invalid_utf8": "bytes that are not UTF-8, or an escaped lone surrogate (\\ud800) that no UTF-8 file can hold",
    "nul_byte": "a NUL character, raw or escaped as \\u0000",
    "invalid_json": "the line is not valid JSON",
    "not_an_object": "valid JSON, but not an object {...}",
    "line_too_long": "a line longer than the limit (--max-line-mb), skipped without being read whole",
    "unknown_format": "an object with none of instruction/output, conversations, messages or text",
    "mixed_format": "a row in another format than the rest of the file",
    "missing_field": "a required field is absent",
    "wrong_type": "a field has the wrong type (e.g. a number where a string belongs)",
    "empty_content": "an empty or whitespace-only text, or no turns at all",
    "unknown_role": "a turn whose role is not one the format knows",
    "bad_turn_order": "turns do not alternate user/assistant after an optional first system turn",
    "last_turn_not_assistant": "the last turn is not the assistant's: there is nothing to learn",
    "inconsistent_type": "a column whose type differs from earlier rows (LLaMA-Factory's loader fails the whole file on it)",
    "last_turn_not_user": "a pair's prompt that does not end on the user's turn, which `chosen` and `rejected` answer",
    "chosen_equals_rejected": "a pair whose two answers are the same text: it prefers nothing",
    "label_not_boolean": "a KTO `label` that is not JSON true or false (\"true\", 1, ...)",
}


def kind(fmt: str) -> str:
    if fmt == "text":
        return "text"
    return fmt.partition("-")[2] or "sft"


def layout(fmt: str) -> str:
    return fmt.partition("-")[0]


def detect(obj: dict) -> str | None:
    """The format a row is written in, or None. A row with `conversations` is sharegpt even when it also has
    alpaca-looking keys; `chosen`/`rejected` make it a pair; a `label` that is or means a boolean (true, "false",
    0, 1: the KTO check then rejects what is not JSON true/false) a KTO row. Another `label` ("math") is an
    ordinary column of a supervised row, unless the file is a KTO set: see rowformat.Rows."""
    if "conversations" in obj:
        base = "sharegpt"
    elif "messages" in obj:
        base = "messages"
    elif "instruction" in obj or "output" in obj:
        base = "alpaca"
    elif "text" in obj:
        return "text"
    else:
        return None
    if "chosen" in obj or "rejected" in obj:
        return f"{base}-preference"
    if kto.boolean_like(obj.get(kto.LABEL)):
        return f"{base}-kto"
    return base


CHECKS: dict[str, Any] = {"alpaca": sft.check_alpaca, "sharegpt": sft.SHAREGPT.check, "messages": sft.MESSAGES.check,
                          **{f"{x}-preference": c for x, c in preference.CHECKS.items()},
                          **{f"{x}-kto": c for x, c in kto.CHECKS.items()},
                          "text": text.check}
TURNS: dict[str, Any] = {"alpaca": sft.alpaca_turns, "sharegpt": sft.SHAREGPT.turns, "messages": sft.MESSAGES.turns,
                         **{f"{x}-preference": t for x, t in preference.TURNS.items()},
                         **{f"{x}-kto": t for x, t in kto.TURNS.items()}}


def entry(fmt: str, file_name: str, seen: set) -> dict[str, Any]:
    """The dataset_info.json entry LLaMA-Factory reads: `formatting`, `ranking`, `columns` and `tags`."""
    module = {"sft": sft, "preference": preference, "kto": kto}.get(kind(fmt))
    if module is None:
        return text.entry(file_name)
    return module.entry(layout(fmt), file_name, seen)


def entry_kind(info: Any) -> str | None:
    """The kind of a dataset_info.json entry (any entry, not only ours), as LLaMA-Factory would read it:
    `ranking` makes pairs, a `kto_tag` column KTO rows, an alpaca entry with columns but no answer column
    plain text (LLaMA-Factory then sets `response` to None); None for an entry that is not a mapping."""
    if not isinstance(info, dict):
        return None
    if info.get("ranking"):
        return "preference"
    columns = info.get("columns")
    columns = columns if isinstance(columns, dict) else None
    if columns and columns.get("kto_tag"):
        return "kto"
    if info.get("formatting", "alpaca") == "alpaca" and columns is not None and not columns.get("response"):
        return "text"
    return "sft"
