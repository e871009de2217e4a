"""Arguments shared by subcommands (recipe name + key=value overrides), and small output helpers."""

from __future__ import annotations

import argparse
import shlex
import sys


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe name (recipes/<name>.yaml) or a path to a recipe file")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="overrides, typed like YAML; dotted for nested (llamafactory.x=1); bare LLaMA-Factory keys allowed")
    parser.add_argument("--set", dest="set_string", default="",
                        help='overrides as one string (what `make SET="a=1 b=2"` passes)')


def overrides(args: argparse.Namespace) -> list[str]:
    return [*shlex.split(args.set_string or ""), *args.overrides]


def warn(problems) -> None:
    for problem in problems:
        print(problem.line(), file=sys.stderr)
