"""`rocmft validate FILE...|--all`: recipes, LLaMA-Factory YAMLs and DeepSpeed JSONs, by their own parsers."""

from __future__ import annotations

import json
from pathlib import Path

from .. import pipeline
from ..hardware import arches
from ..io.problems import EXIT_INVALID, Problem, ProblemReport
from ..recipe import recipes
from ..validate import where
from .common import split_set

HELP = "validate recipes, LLaMA-Factory YAMLs or DeepSpeed JSONs (all problems at once; exit 2 if any)"


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="*", help="recipe .yaml, LLaMA-Factory train .yaml, or DeepSpeed .json")
    parser.add_argument("--all", action="store_true", help="every shipped recipe in recipes/")
    parser.add_argument("--recipe", default=None,
                        help="one recipe by name (yours in my/recipes/ too) or path, with --set's overrides applied")
    parser.add_argument("--set", dest="set_string", default="",
                        help='overrides for --recipe, as `make validate RECIPE=x SET="a=1 b=2"` passes them')
    parser.add_argument("--arch", default=None,
                        help="judge plain LLaMA-Factory YAMLs for this arch (bf16 support); without it such checks are notes")


def _validate_recipe(path: str, arch_name: str | None = None, overrides: list[str] | None = None) -> list[Problem]:
    prep = pipeline.prepare(path, overrides or (), run_name=None, validate=False, arch=arch_name)
    return pipeline.validate_rendered(prep.recipe, prep.rendered, prep.run_path)


def _validate_train_yaml(path: Path, data: dict, arch_name: str | None = None) -> list[Problem]:
    """A plain LLaMA-Factory file: its relative paths (dataset_dir, deepspeed, a local model) are read from
    the current directory, as `llamafactory-cli train` reads them, not from this project."""
    from ..validate import deepspeed as ds_check
    from ..validate import inputs
    from ..validate import llamafactory as lf_check

    lf = lf_check.check(data, str(path), arches.get(arch_name) if arch_name else None)
    problems = lf.problems + inputs.check(data, str(path), Path.cwd())
    if data.get("deepspeed"):
        ds_path = Path(str(data["deepspeed"])).expanduser()
        try:
            cfg = json.loads(ds_path.read_text())
        except FileNotFoundError:
            problems.append(Problem(str(path), "deepspeed", f"`{data['deepspeed']}` does not exist"))
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(ds_path), "", f"not valid JSON: line {exc.lineno}: {exc.msg}"))
        else:
            problems += ds_check.check(cfg, str(ds_path), lf.hf_args, 1)
    return sorted(problems + lf.notes, key=lambda p: p.severity != "error")


def validate_file(path_text: str, arch_name: str | None = None) -> list[Problem]:
    path = Path(path_text)
    if not path.is_file():
        return [Problem(path_text, "", "file not found")]
    if path.suffix == ".json":
        from ..validate import deepspeed as ds_check

        try:
            cfg = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            return [Problem(path_text, "", f"not valid JSON: line {exc.lineno}: {exc.msg}")]
        return ds_check.check(cfg, path_text)
    data = recipes.read_yaml(path)
    if "llamafactory" in data or "base" in data:
        return _validate_recipe(str(path), arch_name)
    return _validate_train_yaml(path, data, arch_name)


def run(args) -> int:
    if args.set_string and not args.recipe:
        raise ProblemReport([Problem("", "SET", "overrides need the recipe they apply to", "make validate RECIPE=x SET=\"k=v\"")])
    if args.recipe:
        return _one_recipe(args)
    targets = [str(recipes.find(n)) for n in recipes.shipped()] if args.all else list(args.files)
    if not targets:
        raise ProblemReport([Problem("", "FILES", "nothing to validate", "give files, or --all for every shipped recipe")])
    if args.arch:
        arches.get(args.arch, key="--arch")  # an unknown arch is one error, not one per file
    failed = 0
    for target in targets:
        try:
            problems = validate_file(target, args.arch)
        except ProblemReport as report:
            problems = report.problems
        except ImportError as exc:  # a light host: plain files need the venv's LLaMA-Factory and DeepSpeed
            problems = [Problem(target, "", f"cannot validate: {exc.name or exc} is not installed here",
                                "run `make setup` (the CPU training stack), or validate a recipe: it can use the arch's image")]
        errors = [p for p in problems if p.severity == "error"]
        for p in problems:
            print(p.line())
        label = Path(target).name if args.all else target
        unchecked = any(p.message.startswith(where.NOT_RUN) for p in problems)
        verdict = "FAIL" if errors else ("inputs only" if unchecked else "ok  ")
        print(f"{verdict}  {label}" + (f"  ({len(errors)} problem{'s' * (len(errors) > 1)})" if errors else ""))
        failed += bool(errors)
    return EXIT_INVALID if failed else 0


def _one_recipe(args) -> int:
    """RECIPE= with SET=: the recipe as `make train` would render it, judged by the same checks."""
    overrides = split_set(args.set_string)
    try:
        problems = _validate_recipe(str(recipes.find(args.recipe)), args.arch, overrides)
    except ProblemReport as report:
        problems = report.problems
    for p in problems:
        print(p.line())
    errors = [p for p in problems if p.severity == "error"]
    shown = f"{args.recipe}" + (f" with {' '.join(overrides)}" if overrides else "")
    print(f"{'FAIL' if errors else 'ok  '}  {shown}" + (f"  ({len(errors)} problem{'s' * (len(errors) > 1)})" if errors else ""))
    return EXIT_INVALID if errors else 0
