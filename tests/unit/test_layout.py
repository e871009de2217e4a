"""The house by the flow: each top-level package (and entry point) of src/rocmft says in its docstring what it may
import, and imports nothing else; those declarations form layers (no circle), with the shared floor (io) at the
bottom importing nothing of rocmft. The root holds entry points only, no module grows past a screenful or two, and
docs/development.md shows the tree as scripts/layout.py draws it from the code."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit import test_import_graph as imports

SPEC = importlib.util.spec_from_file_location("layout_script", ROOT / "scripts" / "layout.py")
layout = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(layout)

MAX_LINES = 450
MAX_ROOT_MODULES = 6


def top(module: str) -> str:
    """`rocmft.run.runs` -> `run`; `rocmft.pipeline` -> `pipeline.py`; `rocmft` itself -> `rocmft`."""
    parts = module.split(".")
    if len(parts) == 1:
        return "rocmft"
    return parts[1] if parts[1] in imports.packages_of(imports.SRC) else parts[1] + ".py"


def violations(graph: dict[str, set[str]], declared: dict[str, set[str] | None]) -> list[str]:
    """One line per import a module makes that its top-level node does not declare (or per undeclared node)."""
    out = [f"{node}: its docstring has no `May import:` line" for node, allowed in declared.items() if allowed is None]
    for module, targets in sorted(graph.items()):
        here = top(module)
        allowed = declared.get(here)
        if here == "rocmft" or allowed is None or "any" in allowed:
            continue
        for target in sorted(targets):
            there = top(target)
            if there not in (here, "rocmft") and there.removesuffix(".py") not in allowed:
                out.append(f"{module} imports {target}: {here} may import only {', '.join(sorted(allowed)) or 'nothing'}")
    return out


def layers(declared: dict[str, set[str] | None]) -> list[list[str]]:
    """The circles among the declarations themselves (what may import what must be a layering)."""
    g = {name.removesuffix(".py"): {d for d in (allowed or ()) if d != "any"} for name, allowed in declared.items()}
    return imports.cycles(g)


def declarations(package: Path) -> dict[str, set[str] | None]:
    return {name: layout.may_import(path) for name, path in layout.nodes(package).items()}


def test_every_import_is_one_its_package_declares():
    found = violations(imports.graph(), declarations(imports.SRC / imports.PACKAGE))
    assert found == [], "imports a package's docstring does not allow:\n" + "\n".join(found)


def test_the_declared_layers_have_no_circle_and_the_floor_imports_nothing():
    declared = declarations(imports.SRC / imports.PACKAGE)
    assert layers(declared) == []
    assert declared["io"] == set()
    assert "launch" not in declared["run"] and "image" not in declared["hardware"]
    assert "cli" not in {d for allowed in declared.values() for d in (allowed or ())}  # nothing imports the CLI


def test_the_checker_catches_a_floor_import_and_an_undeclared_package(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / imports.PACKAGE
    for name, doc, body in (("io", "May import: nothing of rocmft.", "def f():\n    from ..recipe import r\n"),
                            ("recipe", "May import: io.", "from ..io import p\n"),
                            ("plan", "No declaration here.", "")):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text(f'"""{doc}"""\n')
    (pkg / "__init__.py").write_text('"""May import: nothing of rocmft."""\n')
    (pkg / "io" / "p.py").write_text("def f():\n    from ..recipe import r\n")  # lazy: still an edge
    (pkg / "recipe" / "r.py").write_text("from ..io import p\n")
    monkeypatch.setattr(imports, "SRC", tmp_path / "src")
    found = violations(imports.graph(), declarations(pkg))
    assert found == ["plan: its docstring has no `May import:` line",
                     "rocmft.io.p imports rocmft.recipe.r: io may import only nothing"]
    assert layers({"io": {"recipe"}, "recipe": {"io"}}) == [["io", "recipe"]]


def test_the_root_holds_only_the_entry_points():
    loose = sorted(p.name for p in (imports.SRC / imports.PACKAGE).glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_ROOT_MODULES, loose


@pytest.mark.parametrize("folder", ["src", "benchmarks", "scripts"])
def test_no_module_is_over_450_lines(folder):
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_docs_show_the_tree_the_code_draws():
    doc = (ROOT / "docs" / "development.md").read_text()
    assert layout.section(layout.tree()) in doc, textwrap.dedent("""
        docs/development.md's layout differs from what the packages' docstrings say:
        run `python3 scripts/layout.py --write`""")
