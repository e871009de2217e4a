"""Arguments shared by subcommands (recipe name + key=value overrides), and small output helpers."""

from __future__ import annotations

import argparse
import sys

from ..recipe.overrides import split_set


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="recipe name (recipes/<name>.yaml) or a path to a recipe file")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="overrides, typed like YAML; dotted for nested (llamafactory.x=1); bare LLaMA-Factory keys allowed")
    parser.add_argument("--set", dest="set_string", default="",
                        help='overrides as one string (what `make SET="a=1 b=2"` passes)')


def add_listen_arguments(parser: argparse.ArgumentParser, port: int) -> None:
    """--host/--port of the servers (serve, webui): this machine only unless the user says otherwise."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", default=None, help=f"TCP port (default {port})")


def add_where_arguments(parser: argparse.ArgumentParser, runtime_default: str, verbose_help: str) -> None:
    """Where chat/serve/webui run: --runtime, the container's GPUs and image, --print-runtime, --verbose."""
    parser.add_argument("--runtime", default=None, help=f"local | docker (default: {runtime_default})")
    parser.add_argument("--gpus", default=None, help="RUNTIME=docker: only these GPUs, e.g. 0,1 (default: all)")
    parser.add_argument("--image", default=None, help="RUNTIME=docker: a local image instead of rocmft:<arch>")
    parser.add_argument("--print-runtime", action="store_true",
                        help="print where this would run (local | docker) and exit (make installs the CPU stack for local)")
    parser.add_argument("--verbose", action="store_true", help=verbose_help)


def overrides(args: argparse.Namespace) -> list[str]:
    return [*split_set(args.set_string), *args.overrides]


def warn(problems) -> None:
    for problem in problems:
        print(problem.line(), file=sys.stderr)
