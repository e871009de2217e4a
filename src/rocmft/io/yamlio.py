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


class LimitError(yaml.MarkedYAMLError):
    """Valid YAML beyond what a config may hold (too deep, too many values, a value holding itself): refused
    wherever YAML is read, even where a syntax error is taken as plain text (a SET= value)."""


def _limit(problem: str, mark) -> LimitError:
    return LimitError(problem=problem, problem_mark=mark)


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


def _values(root: yaml.Node) -> int:
    """How many values `root` stands for with every alias expanded; an alias is the same node object, counted
    once per use but walked once. Iterative, and a node met again while its own children are still being
    counted is an alias inside its own anchor (`x: &a [*a]`): a value that holds itself, which no copy, merge
    or JSON dump can ever finish (a RecursionError traceback, issue 43)."""
    done: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in done:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if children_done:
            open_nodes.discard(id(node))
            done[id(node)] = 1 + sum(done[id(c)] for c in children)
            continue
        if id(node) in open_nodes:
            raise _limit("an alias inside its own anchor: the value would hold itself", node.start_mark)
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise _limit("an alias inside its own anchor: the value would hold itself", child.start_mark)
            stack.append((child, False))
    return done[id(root)]


def parse_yaml(text: str) -> Any:
    _check_depth(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _values(node) > MAX_VALUES:
            raise _limit(f"its aliases expand to more than {MAX_VALUES:,} values (a recipe holds a few dozen)",
                         node.start_mark)
        return loader.construct_document(node)
    finally:
        loader.dispose()
