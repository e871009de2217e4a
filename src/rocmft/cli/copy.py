"""`rocmft copy RECIPE NEW`: start your own recipe from a shipped one (never overwrites)."""

from __future__ import annotations

import re
import shutil

from .. import paths, recipes
from ..problems import Problem, ProblemReport

HELP = "copy a recipe to recipes/<new>.yaml to edit (refuses to overwrite)"


def add_arguments(parser) -> None:
    parser.add_argument("recipe")
    parser.add_argument("to", nargs="?", default="", help="new recipe name")


def run(args) -> int:
    if not args.to or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.to):
        raise ProblemReport([Problem("", "TO", f"`{args.to}` is not a recipe name", "e.g. TO=my-llama3 (letters, digits, . _ -)")])
    source = recipes.find(args.recipe)
    target = paths.recipes_dir() / f"{args.to}.yaml"
    if target.exists():
        raise ProblemReport([Problem("", "TO", f"{target.relative_to(paths.root())} exists: not overwritten", "pick another name")])
    shutil.copyfile(source, target)
    print(f"copied {source.name} -> recipes/{target.name}; edit it, then: make train RECIPE={args.to}")
    return 0
