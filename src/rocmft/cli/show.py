"""`rocmft show RECIPE [k=v...]`: the fully resolved recipe (bases merged, overrides applied)."""

from __future__ import annotations

import yaml

from ..recipe import recipes
from .common import add_recipe_arguments, overrides

HELP = "print the fully resolved recipe (bases merged, overrides applied)"


def add_arguments(parser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--arch", default=None, help="override the recipe's arch")


def run(args) -> int:
    extra = overrides(args) + ([f"arch={args.arch}"] if args.arch else [])
    recipe = recipes.load(args.recipe, extra)
    print(f"# {recipe.name}: resolved from {' <- '.join(recipe.chain[::-1])}")
    print(yaml.safe_dump(recipe.to_dict(), sort_keys=False, allow_unicode=True), end="")
    return 0
