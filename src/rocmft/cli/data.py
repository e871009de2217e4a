"""`rocmft data IN NAME`: check a JSONL dataset row by row, keep the good rows, register it for LLaMA-Factory.

Nothing heavy is imported here: the checks are stdlib only; the tokenizer (transformers, LLaMA-Factory)
is imported only when --tokenizer is given.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.formats import FORMATS
from ..data.options import Split
from ..io.problems import Problem, ProblemReport

HELP = ("check a dataset (SFT, preference pairs, KTO or plain text; JSONL, JSON array, Parquet, CSV or .txt), "
        "keep the good rows, name the bad ones and the duplicates, register it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN", help="the file to check (never modified): JSON Lines, a JSON array, Parquet, CSV, or .txt (one document per line)")
    parser.add_argument("name", metavar="NAME", nargs="?", default=None,
                        help="dataset name: writes data/<NAME>.jsonl and registers <NAME> in data/dataset_info.json")
    parser.add_argument("--format", dest="fmt", default="auto", choices=("auto", *FORMATS),
                        help="row format (default: detected from the first rows)")
    parser.add_argument("--force", action="store_true", help="replace an existing data/<NAME>.jsonl and registry entry")
    parser.add_argument("--check", action="store_true", help="only read and report: write and register nothing")
    parser.add_argument("--convert", action="store_true",
                        help="IN must be one JSON array of rows (an array is read as one without it too)")
    parser.add_argument("--dedup", action="store_true",
                        help="drop every row that repeats an earlier row exactly (they are counted either way)")
    parser.add_argument("--data-dir", default=None,
                        help="the folder holding dataset_info.json (default: $ROCMFT_DATA_DIR, else my/data/ "
                             "of the project: yours, ignored by git)")
    parser.add_argument("--tokenizer", default=None, metavar="DIR",
                        help="model or tokenizer folder: also report token lengths and rows over the recipe's cutoff_len")
    parser.add_argument("--recipe", default="tiny-cpu",
                        help="recipe whose held-out split (val_size, seed, max_samples) is counted, and whose "
                             "cutoff_len and template apply with --tokenizer")
    parser.add_argument("--max-line-mb", type=float, default=None,
                        help="a longer line is rejected (line_too_long) without being read whole (default 16)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always show the progress bar (default: on a terminal, for files over 32 MB)")
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def data_dir(value: str | None) -> Path:
    if value:
        return Path(value)
    from ..io import paths

    try:
        return paths.user_data_dir()
    except FileNotFoundError as exc:
        raise ProblemReport([Problem("", "DATA_DIR", str(exc), "or pass --data-dir DIR")]) from None


def _split(recipe) -> Split | None:
    """How the recipe holds rows out, when it does (the bases set val_size)."""
    lf = recipe.llamafactory
    try:
        val_size = float(lf.get("val_size") or 0)
        seed = int(lf.get("seed", 42))
        max_samples = int(lf["max_samples"]) if lf.get("max_samples") else None
    except (TypeError, ValueError):
        return None  # the recipe's own validation names the value
    return Split(recipe.name, val_size, seed, max_samples) if val_size > 0 else None


def run(args: argparse.Namespace) -> int:
    from ..data import prepare

    opts = prepare.Options(
        source=Path(args.input),
        name=args.name,
        data_dir=data_dir(args.data_dir),
        fmt=args.fmt,
        force=bool(args.force),
        check_only=bool(args.check),
        convert=bool(args.convert),
        dedup=bool(args.dedup),
        workspace=args.data_dir is None,
        progress=args.progress,
    )
    if args.max_line_mb is not None:
        if args.max_line_mb <= 0:
            raise ProblemReport([Problem("", "--max-line-mb", "must be a positive number of megabytes")])
        opts.max_line_bytes = int(args.max_line_mb * (1 << 20))
    from ..recipe import recipes

    recipe = recipes.load(args.recipe)
    opts.split = _split(recipe)
    if args.tokenizer:
        lf = recipe.llamafactory
        opts.tokenizer = args.tokenizer
        opts.template = lf.get("template")
        opts.cutoff_len = int(lf["cutoff_len"]) if lf.get("cutoff_len") else None
        opts.recipe = recipe.name
    summary = prepare.run(opts)
    for line in prepare.report(summary):
        print(line)
    return 2 if summary.set_problem else 0  # --check of a KTO set of one label: reported, and a failure
