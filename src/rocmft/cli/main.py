"""`rocmft <command>`: find the subcommand modules, parse, run, turn problems into one line each + exit 2."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from .. import __version__
from ..io.hostio import UnsafeFile
from ..io.problems import EXIT_INVALID, ProblemReport

_NOT_COMMANDS = {"main", "common"}


def _commands() -> dict[str, object]:
    package = importlib.import_module("rocmft.cli")
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in _NOT_COMMANDS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"rocmft.cli.{info.name}")
        found[getattr(module, "NAME", info.name.replace("_", "-"))] = module
    return dict(sorted(found.items()))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocmft", description="Fine-tune open LLMs with LLaMA-Factory on AMD GPUs.")
    parser.add_argument("--version", action="version", version=f"rocmft {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, module in _commands().items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may follow options (`rocmft train x --quiet lr=1`); argparse stops collecting
    # positionals at the first option, so take the rest here.
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_INVALID
    try:
        return int(args._run(args) or 0)
    except ProblemReport as report:
        for problem in report.problems:
            print(problem.line(), file=sys.stderr)
        return EXIT_INVALID if report.errors else 0
    except UnsafeFile as exc:  # a link or a stranger's file where the host writes: refused, nothing written
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
