"""YAML as users write it: `5e-5` is a number (YAML 1.1 would read it as a string).

A recipe or config from elsewhere is read within limits, each one line like a syntax error: nesting deeper
than anyone writes (PyYAML composes recursively: 20,000 brackets were a RecursionError traceback), and
aliases that expand to more values than a config holds (a "billion laughs" file is a few hundred bytes;
PyYAML shares the aliased objects, but every copy, merge and JSON dump after it - the validation request sent
to a container included - expands them)."""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_DEPTH = 64  # the deepest shipped recipe or LLaMA-Factory/DeepSpeed config nests 4
MAX_VALUES = 100_000  # values after expanding aliases; a large DeepSpeed config holds a few hundred


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads `5e-5` as a string (it wants `5.0e-5`); users mean a number, so read it as one."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _limit(problem: str, mark) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


def _check_depth(text: str) -> None:
    """The parser reads events without recursion: count the nesting before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise _limit(f"nested more than {MAX_DEPTH} levels deep (a recipe needs a few)", event.start_mark)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _values(node: yaml.Node, seen: dict[int, int]) -> int:
    """How many values `node` stands for with every alias expanded; an alias is the same node object, counted
    once per use but walked once (`seen`)."""
    if id(node) in seen:
        return seen[id(node)]
    if isinstance(node, yaml.MappingNode):
        total = 1 + sum(_values(k, seen) + _values(v, seen) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_values(v, seen) for v in node.value)
    else:
        total = 1
    seen[id(node)] = total
    return total


def parse_yaml(text: str) -> Any:
    _check_depth(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _values(node, {}) > MAX_VALUES:
            raise _limit(f"its aliases expand to more than {MAX_VALUES:,} values (a recipe holds a few dozen)",
                         node.start_mark)
        return loader.construct_document(node)
    finally:
        loader.dispose()
