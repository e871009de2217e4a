"""`rocmft copy RECIPE NEW`: start your own recipe from a shipped one, in my/recipes/ (never overwrites)."""

from __future__ import annotations

import re

from ..importer.write import create
from ..io import paths
from ..recipe import recipes

HELP = "copy a recipe to my/recipes/<new>.yaml to edit (refuses to overwrite)"


def add_arguments(parser) -> None:
    parser.add_argument("recipe")
    parser.add_argument("to", nargs="?", default="", help="new recipe name")


def retitled(text: str, source: str, name: str) -> str:
    """The copy's header says what it is: its first comment line (the description `make list` shows) names the
    copy and where it came from, and the header's command lines train the copy, not the original. The rest of
    the file is the original's, byte for byte."""
    lines = text.splitlines(keepends=True)
    header = 0
    while header < len(lines) and lines[header].startswith("#"):
        header += 1
    if not header:
        return f"# {name}: copied from {source}\n" + text
    first = lines[0][1:].strip()
    lines[0] = f"# {name}: copied from {source}" + (f": {first}" if first else "") + "\n"
    own = re.compile(rf"\bRECIPE={re.escape(source)}(?![\w.-])")
    lines[1:header] = [own.sub(f"RECIPE={name}", line) for line in lines[1:header]]
    return "".join(lines)


def run(args) -> int:
    target = recipes.new_path(args.to)
    source = recipes.find(args.recipe)
    text = retitled(source.read_text(encoding="utf-8"), source.stem, args.to)
    create(target, text)  # exclusive: never through a link planted at the name
    print(f"copied {source.name} -> {paths.shown(target)}; edit it, then: make train RECIPE={args.to}")
    return 0
