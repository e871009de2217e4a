"""KTO rows (stage `kto`): one supervised row plus a boolean `label`: is its answer desirable (true) or not (false).

- alpaca-kto:   {"instruction", "input"?, "output", "label": true|false, ...}
- sharegpt-kto: {"conversations": [... ending on the assistant's turn], "label": true|false, ...}
- messages-kto: {"messages": [...], "label": true|false}

LLaMA-Factory reads the label through the `kto_tag` column and only when it is a JSON boolean
(data/converter.py checks `isinstance(..., bool)`): a "true" string or a 1 would silently turn the row
into an unlabelled one, which its KTO preprocessing then drops. A set whose labels are all one value
gives KTO nothing to contrast (LLaMA-Factory only warns "Your dataset only has one preference type"):
`make data` refuses to register it (prepare.py reads the counts this module keeps in `Columns.labels`).
"""

from __future__ import annotations

import json
from typing import Any

from . import sft
from .rowcheck import BadRow, Columns, required

LABEL = "label"


def boolean_like(value) -> bool:
    """A label that is a boolean or is meant as one: what makes a row a KTO row."""
    kind = type(value)
    return kind is bool or (kind is str and value.strip().lower() in ("true", "false")) or (kind is int and value in (0, 1))


def label(obj: dict) -> bool:
    value = required(obj, LABEL, ": a KTO row says whether its answer is desirable (true) or not (false)")
    if type(value) is not bool:
        if value is None:
            raise BadRow("missing_field", f"`{LABEL}` is null")
        shown = json.dumps(value, ensure_ascii=False)
        raise BadRow("label_not_boolean", f"`{LABEL}` must be JSON true or false, got {shown[:40]}")
    return value


def _with_label(check, known: frozenset):
    def run(obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
        turns, chars = check(obj, columns, line, seen, known)
        columns.labels[label(obj)] += 1
        return turns, chars

    return run


CHECKS = {"alpaca": _with_label(sft.check_alpaca, sft.ALPACA_KEYS | {LABEL}),
          **{name: _with_label(chat.check, chat.row_keys | {LABEL}) for name, chat in sft.CHATS.items()}}
TURNS = {"alpaca": sft.alpaca_turns, **{name: chat.turns for name, chat in sft.CHATS.items()}}


def one_label_only(labels) -> str | None:
    """Why a set of rows with these label counts cannot train KTO, or None."""
    if labels[True] and labels[False]:
        return None
    value = "true" if labels[True] else "false"
    return (f"every kept row has `{LABEL}: {value}`: KTO learns from desirable AND undesirable answers, "
            "and a set of one kind gives it nothing to contrast")


def entry(layout: str, file_name: str, seen: set) -> dict[str, Any]:
    tag = ("kto_tag", LABEL)
    if layout == "alpaca":
        return {"file_name": file_name, "formatting": "alpaca",
                "columns": sft.alpaca_columns(seen, ("response", "output"), tag)}
    return sft.chat_entry(layout, file_name, seen, tag)
