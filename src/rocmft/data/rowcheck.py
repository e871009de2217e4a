"""What every kind's row checks share: the BadRow they raise, the type names they print, the columns they track.

A check raises `BadRow(reason, detail)`; a good row returns (turns, characters). The checks are written
for speed (a million rows must validate faster than the posts' json.loads + json.dumps loop): plain
loops, `type(x) is str`, no allocation on the good path.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


class BadRow(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def text(value: Any, what: str) -> int:
    """Length of a required non-empty string, or BadRow."""
    if type(value) is not str:
        if value is None:
            raise BadRow("missing_field", f"{what} is null")
        raise BadRow("wrong_type", f"{what} must be a string, got {a(type_name(value))}")
    if not value or value.isspace():
        raise BadRow("empty_content", f"{what} is empty")
    return len(value)


def required(obj: dict, key: str, why: str = "") -> Any:
    if key not in obj:
        raise BadRow("missing_field", f"`{key}` is missing{why}")
    return obj[key]


class Columns:
    """Types of the columns a format does not define (`id`, `source`, per-turn `weight`...), first seen
    wins. pyarrow, under LLaMA-Factory's loader, fixes a column's type from the first rows and fails the
    whole dataset on a later row that differs, so such a row is rejected here instead.

    `labels` counts the KTO labels of the rows that passed: a set of one label only is refused as a whole."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[str, int]] = {}
        self.labels: Counter = Counter()

    def check(self, where: str, key: str, value: Any, line: int) -> None:
        if value is None:
            return
        kind = type_name(value)
        slot = f"{where}{key}"
        seen = self.types.get(slot)
        if seen is None:
            self.types[slot] = (kind, line)
        elif seen[0] != kind:
            raise BadRow("inconsistent_type", f"`{slot}` is {a(kind)} here but {a(seen[0])} on line {seen[1]}")

    def extras(self, obj: dict, known: frozenset, line: int) -> None:
        """Check the row's columns that the format does not define."""
        for key in obj:
            if key not in known:
                self.check("", key, obj[key], line)


def bad_strings(value: Any) -> str | None:
    """'nul_byte' / 'invalid_utf8' when a string anywhere in the value holds NUL or a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "nul_byte"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "invalid_utf8"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None
