"""The package layout of src/rocmft, drawn from the code: each package's and entry point's docstring (its first
paragraph: what it owns) and its `May import:` line (what it may use). docs/development.md shows this output
between its layout markers; tests/unit/test_layout.py fails when the two differ.

    python3 scripts/layout.py           # print the tree
    python3 scripts/layout.py --write   # put it into docs/development.md
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rocmft"
DOC = ROOT / "docs" / "development.md"
BEGIN, END = "<!-- layout: drawn by scripts/layout.py from the packages' docstrings -->", "<!-- /layout -->"
# The order the flow reads in: the floor, then recipe -> render -> validate -> plan -> launch -> run, then the rest.
ORDER = ("io", "hardware", "recipe", "validate", "plan", "image", "launch", "run", "pipeline.py", "worker.py",
         "tiny_model.py", "callbacks", "data", "serve", "evaluate", "fetch", "importer", "canary", "bench", "doctor",
         "cli")


def nodes(package: Path = PACKAGE) -> dict[str, Path]:
    """The top level of the package: each sub-package (its __init__.py) and each module beside them."""
    found = {p.name: p / "__init__.py" for p in package.iterdir() if (p / "__init__.py").is_file()}
    found |= {p.name: p for p in package.glob("*.py") if p.name != "__init__.py"}
    return found


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def may_import(path: Path) -> set[str] | None:
    """The names after `May import:` (None when the docstring has no such line; `any` for every package)."""
    for line in docstring(path).splitlines():
        if line.startswith("May import:"):
            text = line.split(":", 1)[1].strip().rstrip(".")
            if text.startswith("any"):
                return {"any"}
            if text.startswith("nothing"):
                return set()
            return {name.strip() for name in text.split(",")}
    return None


def summary(path: Path) -> str:
    first = docstring(path).split("\n\n")[0]
    return " ".join(first.split())


def tree(package: Path = PACKAGE) -> str:
    found = nodes(package)
    names = [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)
    width = max(len(n) + 1 for n in names)
    lines = ["src/rocmft/"]
    for name in names:
        label = name if name.endswith(".py") else name + "/"
        allowed = may_import(found[name])
        uses = "" if allowed is None else (" [may import: " + (", ".join(sorted(allowed)) or "nothing") + "]")
        text = textwrap.wrap(summary(found[name]) + uses, 116 - width - 4)
        lines.append(f"  {label:<{width}} {text[0] if text else ''}")
        lines += [f"  {'':<{width}} {t}" for t in text[1:]]
    return "\n".join(lines) + "\n"


def section(text: str) -> str:
    return f"{BEGIN}\n```\n{text}```\n{END}"


def main(argv: list[str]) -> int:
    text = tree()
    if "--write" not in argv:
        print(text, end="")
        return 0
    doc = DOC.read_text()
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    DOC.write_text(doc[:start] + section(text) + doc[end:])
    print(f"wrote the layout into {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
