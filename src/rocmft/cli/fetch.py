"""`rocmft fetch RECIPE | --model ORG/NAME | --tasks mmlu,arc_easy`: download the model (and the Hub datasets) a
run reads, or the datasets of lm-evaluation-harness tasks (`make eval TASKS=`), into HF_HOME, so a job without
internet (Slurm compute nodes, HF_HUB_OFFLINE=1) finds them in the cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from ..fetch import plan as fetch
from ..io import paths
from ..io.problems import Problem, ProblemReport, raise_if_errors
from .common import overrides, warn

HELP = ("download a recipe's model and Hub datasets, or benchmarks' datasets (--tasks), into HF_HOME (resumable; "
        "MODEL= for one model)")


def add_arguments(parser) -> None:
    parser.add_argument("recipe", nargs="?", default=None, help="recipe name or file (its model and Hub datasets)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides")
    parser.add_argument("--set", dest="set_string", default="", help="overrides as one string (make SET=)")
    parser.add_argument("--model", default=None, help="a Hub model id instead of a recipe's")
    parser.add_argument("--tasks", default="",
                        help="lm-evaluation-harness tasks (comma-separated names or task YAMLs): their datasets too")
    parser.add_argument("--arch", default=None, help="the image to run in for --runtime docker (default: the recipe's)")
    parser.add_argument("--runtime", default=None,
                        help="local (this venv's huggingface_hub) | docker (the arch's image); default: local when "
                             "this venv has huggingface_hub")
    parser.add_argument("--image", default=None, help="--runtime docker: a local image instead of rocmft:<arch>")
    parser.add_argument("--print-runtime", action="store_true", help="print local or docker and exit")
    parser.add_argument("--print", dest="print_plan", action="store_true",
                        help="print the plan (what, argv, environment; secrets by name) as JSON and exit")


def _venv_has_hub() -> bool:
    return importlib.util.find_spec("huggingface_hub") is not None


def _venv_has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None  # found, not imported: this CLI imports no lm_eval


def _what(args) -> tuple[list[fetch.Target], list[str], str]:
    """(targets, notes, arch) from --model or the recipe, rendered as a run would render it (no validation), and
    --tasks (beside either, or alone)."""
    tasks = fetch.task_targets(args.tasks, Path.cwd()) if args.tasks else []
    if tasks and not args.model and not args.recipe:
        return tasks, [], args.arch or "cpu"
    found, notes, arch = _run_what(args)
    return found + tasks, notes, arch


def _run_what(args) -> tuple[list[fetch.Target], list[str], str]:
    if args.model:
        if args.recipe:
            raise ProblemReport([Problem("", "MODEL", "give a RECIPE or a MODEL, not both")])
        found, notes = fetch.targets({"model_name_or_path": args.model}, paths.root())
        return found, notes, args.arch or "cpu"
    if not args.recipe:
        raise ProblemReport([Problem("", "RECIPE", "nothing to fetch",
                                     "RECIPE=<recipe>, MODEL=<org/name> or TASKS=<harness tasks>")])
    from .. import pipeline

    prep = pipeline.prepare(args.recipe, overrides(args), arch=args.arch, validate=False)
    found, notes = fetch.targets(prep.rendered.args, paths.root())
    return found, notes, prep.recipe.arch


def _plan(found, arch_name: str, runtime: str, image_ref: str | None) -> fetch.FetchPlan:
    if runtime == "local":
        lacking = "huggingface_hub" if not _venv_has_hub() else (
            "lm_eval" if any(t.repo_type == "task" for t in found) and not _venv_has("lm_eval") else "")
        if lacking:
            raise ProblemReport([Problem("", "RUNTIME", f"this venv has no {lacking} (the light host)",
                                         "`make setup` (the CPU stack has it), or RUNTIME=docker with the arch's image")])
        return fetch.venv_plan(found, os.environ, sys.executable, paths.root())
    from ..hardware import arches
    from ..validate import where

    place, why = where._local_image(arches.get(arch_name), image_ref)
    if place is None:
        raise ProblemReport([Problem("", "RUNTIME", f"cannot fetch in the {arch_name} image: {why}",
                                     f"`make image ARCH={arch_name}`, or `make setup` and RUNTIME=local")])
    return fetch.image_plan(found, os.environ, place.ref, paths.root(), os.getuid(), os.getgid(),
                            tty=sys.stdout.isatty())


def run(args) -> int:
    runtime = args.runtime or ("local" if _venv_has_hub() else "docker")
    if args.print_runtime:
        print(runtime)
        return 0
    if runtime not in ("local", "docker"):
        raise ProblemReport([Problem("", "RUNTIME", f"unknown runtime `{runtime}` for fetch", "local or docker")])
    found, notes, arch_name = _what(args)
    raise_if_errors(fetch.task_file_problems(found, paths.root(), os.environ))
    for note in notes:
        print(note)
    if not found:
        return 0
    if not args.print_plan:  # the Hub's own word on each model before a long download starts (validate.model)
        _ask_hub(found)
    plan = _plan(found, arch_name, runtime, args.image)
    if args.print_plan:
        print(plan.to_json(), end="")
        return 0
    if plan.where == "image":  # a missing bind source would be created by the daemon, owned by root
        for folder in (plan.env["HF_HOME"], plan.env.get("HF_HUB_CACHE", "")):
            if os.path.isabs(folder):
                os.makedirs(folder, exist_ok=True)
    env = {**os.environ, **plan.env} if plan.where == "venv" else os.environ
    return subprocess.run(list(plan.argv), env=env, check=False).returncode


def _ask_hub(found: list[fetch.Target]) -> None:
    from ..io import hubcache
    from ..validate import model

    if hubcache.offline(os.environ):
        return  # the worker reports cache hits and misses itself
    problems = []
    for target in (t for t in found if t.repo_type == "model"):
        request = model.auth_request(target.repo_id, os.environ)
        try:
            answer, reason = model.send(request, os.environ), ""
        except OSError as exc:
            reason = str(getattr(exc, "reason", "") or exc)
            raise ProblemReport([Problem("", "MODEL", f"cannot reach the Hub ({model.endpoint(os.environ)}) from here "
                                         f"to download `{target.repo_id}`: {reason}",
                                         "fetch where there is internet (a login node), into the HF_HOME the job uses")])
        if 200 <= answer.status < 300:
            continue
        problems += model.verdict(target.repo_id, request, answer, os.environ, key="MODEL", reason=reason)
    warn(raise_if_errors(problems))
