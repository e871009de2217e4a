"""Command-line overrides: `key=value` (dotted for nested, typed like YAML) applied to a resolved recipe."""

from __future__ import annotations

import copy
import re
from typing import Any, Iterable

import yaml

from ..io.problems import Problem, raise_if_errors
from ..io.yamlio import LimitError, parse_yaml

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_ITEM_START = re.compile(r"""['"]?[A-Za-z_][A-Za-z0-9_.\-]*=""")
_NEXT_ITEM = re.compile(r"""\s+(?=['"]?[A-Za-z_][A-Za-z0-9_.\-]*=)""")


def split_set(text: str | None) -> list[str]:
    """`SET="lr=5e-5 default_system=You're helpful"` -> items. A value runs to the next ` key=`, as typed:
    an apostrophe is text. A value (or a whole item) in quotes ends at its closing quote, so it may hold
    ` key=` itself: `default_system='Answer x=1 only'`."""
    items: list[str] = []
    rest = (text or "").strip()
    while rest:
        key = _ITEM_START.match(rest)
        opening = 0 if rest[0] in "'\"" else key.end() if key and rest[key.end():key.end() + 1] in ("'", '"') else -1
        closing = _closing_quote(rest, opening) if opening >= 0 else None
        if closing is not None:
            items.append(rest[:opening] + rest[opening + 1:closing])
            rest = rest[closing + 1:].lstrip()
            continue
        after = _NEXT_ITEM.search(rest)
        items.append(rest[:after.start()] if after else rest)
        rest = rest[after.end():] if after else ""
    return items


def _closing_quote(text: str, opening: int) -> int | None:
    """The quote matching text[opening]: the next same quote that ends a word (an apostrophe inside one does not)."""
    found = re.compile(re.escape(text[opening]) + r"(?=\s|$)").search(text, opening + 1)
    return found.start() if found else None


def parse_overrides(items: Iterable[str], project_keys: Iterable[str] = ()) -> list[tuple[list[str], Any]]:
    """`key=value` (dotted for nested, typed like YAML) -> (path, value). All malformed items reported."""
    parsed: list[tuple[list[str], Any]] = []
    problems: list[Problem] = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not _KEY.match(key) or ".." in key or key.endswith("."):
            problems.append(Problem("SET", item, "an override must be key=value (dotted key for nested, e.g. llamafactory.learning_rate=5e-5)"))
            continue
        try:
            value = parse_yaml(raw) if raw.strip() else None
        except LimitError as exc:
            problems.append(Problem("SET", key, str(exc.problem), "write the value out in full"))
            continue
        except yaml.YAMLError:
            value = raw  # an unquotable string such as `a: b` is taken literally
        segments = key.split(".")
        # A bare LLaMA-Factory argument (`learning_rate=5e-5`) is the common case: route it into the block.
        if segments[0] not in project_keys and segments[0] != "llamafactory":
            segments = ["llamafactory", *segments]
        parsed.append((segments, value))
    raise_if_errors(problems)
    return parsed


def apply_overrides(data: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    result = copy.deepcopy(data)
    for segments, value in overrides:
        node = result
        for seg in segments[:-1]:
            if not isinstance(node.get(seg), dict):
                node[seg] = {}
            node = node[seg]
        if value is None:
            node.pop(segments[-1], None)
        else:
            node[segments[-1]] = value
    return result
