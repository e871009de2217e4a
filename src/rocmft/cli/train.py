"""`rocmft train RECIPE [k=v...]`: render, validate, plan, then launch on the chosen runtime."""

from __future__ import annotations

import importlib
import os

from .. import pipeline
from ..io.problems import Problem, ProblemReport, raise_if_errors
from .common import add_recipe_arguments, overrides, warn

HELP = "render + validate + plan + launch a recipe (RUNTIME=local|docker|slurm|k8s)"
RUNTIMES = ("local", "docker", "slurm", "k8s")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "yes", "true")


def runtime_module(name: str):
    return importlib.import_module(f"rocmft.launch.{name}")


def add_arguments(parser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--runtime", default=None, help="local | docker | slurm | k8s (default: local for cpu, docker for GPU arches)")
    parser.add_argument("--gpus", default=None, help="GPU indices on this host, e.g. 0,1 (sets the process count)")
    parser.add_argument("--nodes", default=None, help="number of nodes (overrides the recipe)")
    parser.add_argument("--arch", default=None, help="override the recipe's arch")
    parser.add_argument("--resume", default=None, help="a run dir or `last`: continue from its newest checkpoint")
    parser.add_argument("--from", dest="start_from", default=None,
                        help="start from an earlier run (dir, name or `last`: its merged export or adapter) or a "
                             "model/adapter folder, e.g. DPO after SFT")
    parser.add_argument("--run-name", default=None, help="name the run dir (refused if it exists)")
    parser.add_argument("--max-restarts", dest="max_restarts", default=None,
                        help="torchrun restarts when a process dies, each resuming from the newest complete checkpoint "
                             "(MAX_RESTARTS=; the recipe's resilience.max_restarts)")
    parser.add_argument("--max-requeues", dest="max_requeues", default=None,
                        help="slurm: requeues after a preemption or the time limit (MAX_REQUEUES=; resilience.max_requeues)")
    parser.add_argument("--force", action="store_true", help="launch even when the planner says it does not fit")
    parser.add_argument("--tune", action="store_true",
                        help="PyTorch TunableOp GEMM tuning, results kept per image and model shape (TUNE=1; rocmft.launch.tuning)")
    parser.add_argument("--no-plan", action="store_true", help="skip the memory plan check")
    parser.add_argument("--quiet", action="store_true", help="no progress lines while it runs (train.log and the summary still)")
    parser.add_argument("--verbose", action="store_true", default=_env_flag("VERBOSE"),
                        help="stream the job's whole output too (default: progress only; it always goes to train.log)")
    parser.add_argument("--dry-run", action="store_true", default=_env_flag("DRY_RUN"),
                        help="print the whole launch plan (container, devices, env, mounts, argv; or the sbatch script / "
                             "manifest) and start nothing: no GPU, Docker daemon or Slurm needed (DRY_RUN=1)")
    parser.add_argument("--print-runtime", action="store_true",
                        help="print the runtime this recipe resolves to and exit (make installs the CPU stack for `local`)")
    for name in RUNTIMES:
        try:
            module = runtime_module(name)
        except ImportError:
            continue
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)


def tune_overrides(args, user: list[str]) -> list[str]:
    """TUNE=1: the TunableOp environment as recipe overrides, tuning on only where this image+shape has no results."""
    if not getattr(args, "tune", False):
        return []
    from importlib import metadata

    from ..hardware import arches
    from ..io import paths
    from ..launch import tuning
    from ..recipe import precision, recipes
    from ..validate import where

    recipe = recipes.load(args.recipe, user + ([f"arch={args.arch}"] if args.arch else []))
    arch = arches.get(recipe.arch, file=recipe.path)
    runtime = args.runtime or where.default_runtime(arch)
    try:
        torch_version = metadata.version("torch")  # the version only: the host CLI imports no torch
    except metadata.PackageNotFoundError:
        torch_version = None
    prec, _ = precision.resolve(recipe.precision, arch, recipe.path, use_cpu=recipe.llamafactory.get("use_cpu") is True)
    plan = tuning.plan(paths.root(), tuning.image_key(runtime, arch.name, getattr(args, "docker_image", None), torch_version),
                       tuning.shape_key(recipe.llamafactory, prec.name))
    plan.folder.mkdir(parents=True, exist_ok=True)  # TunableOp writes the file at exit, not the folder
    print(f"[rocmft] {plan.line()}", flush=True)
    return plan.overrides()


def _check_plan(prep: pipeline.Prepared, force: bool) -> None:
    try:
        from .. import plan as planner
    except ImportError:
        return
    result = planner.check(prep.recipe)
    print(result.summary)
    prep.planned_time = result.throughput.time if result.throughput is not None else None
    if not result.fits and not force:
        raise ProblemReport([Problem(prep.recipe.path, "", "the planner says this run does not fit in GPU memory",
                                     "follow a suggestion above, or FORCE=1 to launch anyway")])


def run(args) -> int:
    from ..validate import where

    if args.print_runtime:
        from ..hardware import arches
        from ..recipe import recipes

        recipe = recipes.load(args.recipe, overrides(args) + ([f"arch={args.arch}"] if args.arch else []))
        print(args.runtime or where.default_runtime(arches.get(recipe.arch, file=recipe.path)))
        return 0
    if args.runtime and args.runtime not in RUNTIMES:
        raise ProblemReport([Problem("", "RUNTIME", f"unknown runtime `{args.runtime}`", f"one of: {', '.join(RUNTIMES)}")])
    if args.runtime in ("slurm", "k8s"):  # their options become text in a script or manifest: checked first
        raise_if_errors(runtime_module(args.runtime).option_problems(args))
    # Validation runs where the job will: the venv for local, the arch's image for docker (`validate.where`).
    faults = [f"resilience.{key}={getattr(args, key)}" for key in ("max_restarts", "max_requeues")
              if getattr(args, key, None) not in (None, "")]
    faults += tune_overrides(args, overrides(args))
    dry = getattr(args, "dry_run", False)
    prep = pipeline.prepare(args.recipe, overrides(args) + faults, arch=args.arch, nodes=args.nodes, gpus=args.gpus,
                            resume=args.resume, start_from=args.start_from, run_name=args.run_name,
                            # a dry run asks no daemon or cluster: validated here when this venv has the stack
                            validate_in=where.auto if dry else where.for_runtime(args.runtime, args),
                            mounted=lambda arch: (args.runtime or where.default_runtime(arch)) in ("docker", "slurm"),
                            # k8s pods read the PVC's HF cache, not this host's: the job finds out there
                            need_model=args.runtime != "k8s" and not dry, remember=not dry, job=True)
    warn(prep.messages)
    runtime = args.runtime or where.default_runtime(prep.arch)
    if not args.no_plan:
        _check_plan(prep, args.force or dry)
    if dry:
        return _dry_run(runtime, prep, args)
    try:
        module = runtime_module(runtime)
    except ImportError as exc:
        raise ProblemReport([Problem("", "RUNTIME", f"runtime `{runtime}` is not available: {exc}")]) from None
    return launch(module, prep, args)


def _dry_run(runtime: str, prep: pipeline.Prepared, args) -> int:
    """The launch plan printed, nothing started. slurm and k8s render their file as a launch does (the k8s
    runtime never talks to the cluster; slurm is not submitted)."""
    from ..launch import dry_run

    if runtime == "slurm":
        return launch(runtime_module("slurm"), prep, dry_run.without_submit(args))
    if runtime == "k8s":
        return launch(runtime_module("k8s"), prep, args)
    print("\n".join(dry_run.lines(runtime, prep, args)), flush=True)
    return 0


def launch(module, prep: pipeline.Prepared, args) -> int:
    """A runtime's own checks (errors raise; its warnings are printed here, not by the runtime), then its launch."""
    if hasattr(module, "check"):
        warn(module.check(prep, args))
    return module.launch(prep, args)
