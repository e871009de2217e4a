"""No import circles in src/rocmft: a walk over every `import` / `from ... import` statement (at any depth:
a lazy import inside a function is still an edge), resolved to rocmft modules, then a cycle search.

A circle is what let the planner reach the Docker daemon (issue 31: image/docker_api -> image/plan ->
image/kernels -> plan/models -> tiny_model -> image/docker_api)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "rocmft"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def packages_of(src: Path) -> set[str]:
    """The names of the top-level packages of rocmft under `src`."""
    return {p.name for p in (src / PACKAGE).iterdir() if (p / "__init__.py").is_file()}


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module a dotted name starts with (`rocmft.image.plan.tags` -> `rocmft.image.plan`)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    # `if TYPE_CHECKING:` imports never run: not an edge
    type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and getattr(block.test, "id", getattr(block.test, "attr", "")) == "TYPE_CHECKING"
                 for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            base = ".".join(p for p in (base if node.level else "", node.module or "") if p)
            # `from . import x` imports the submodule x when there is one, else a name of the package
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            targets = [t for t in targets if t != base] if any(f"{base}.{a.name}" in known for a in node.names) \
                else [base]
        else:
            continue
        for target in targets:
            resolved = _resolve(target, known)
            if resolved and resolved != name and resolved.startswith(PACKAGE):
                found.add(resolved)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: edges(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component with more than one module (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(g):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_walker_finds_a_circle(tmp_path):
    pkg = tmp_path / "src" / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")  # lazy, still an edge
    (pkg / "c.py").write_text("import rocmft.a\n")
    global SRC
    saved, SRC = SRC, tmp_path / "src"
    try:
        assert cycles(graph()) == [["rocmft.a", "rocmft.sub.b"]]
    finally:
        SRC = saved


def test_no_import_circles_in_rocmft():
    found = cycles(graph())
    assert found == [], "import circles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in found)
