"""`rocmft copy RECIPE NEW`: start your own recipe from a shipped one (never overwrites)."""

from __future__ import annotations

from ..importer.write import create
from ..recipe import recipes

HELP = "copy a recipe to recipes/<new>.yaml to edit (refuses to overwrite)"


def add_arguments(parser) -> None:
    parser.add_argument("recipe")
    parser.add_argument("to", nargs="?", default="", help="new recipe name")


def run(args) -> int:
    target = recipes.new_path(args.to)
    source = recipes.find(args.recipe)
    create(target, source.read_text(encoding="utf-8"))  # exclusive: never through a link planted at the name
    print(f"copied {source.name} -> recipes/{target.name}; edit it, then: make train RECIPE={args.to}")
    return 0
