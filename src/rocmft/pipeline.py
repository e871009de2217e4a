"""The flow every command shares: recipe -> render -> validate -> (plan) -> a run directory on disk.

`prepare` does everything that can fail on bad input BEFORE anything is written: a run directory only
exists for a recipe that rendered and validated.

May import: io, hardware, recipe, run, plan, validate, launch, tiny_model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from .hardware import arches
from .io import paths
from .io.problems import Problem, ProblemReport, raise_if_errors
from .launch import plan as launch_plan
from .launch.prepared import build_plan, commit  # noqa: F401  (re-exported: every caller of prepare)
from .recipe import recipe_env, recipes, render, tracking
from .run import chain, layout, run_trust, runs
from .run.jobfiles import JOB_DIR

if TYPE_CHECKING:
    from .validate.where import Place


@dataclass
class Prepared:
    recipe: recipes.Recipe
    arch: arches.Arch
    rendered: render.Rendered
    run_dir: Path  # chosen; created by `commit`
    run_path: str
    gpus: tuple[str, ...] | None
    resume_from: str | None
    messages: list[Problem] = field(default_factory=list)  # warnings and notes to show the user
    validated_in: str = ""  # where LLaMA-Factory's and DeepSpeed's checks ran ("" = not run), recorded in status.json
    start: chain.Start | None = None  # FROM=: the earlier run (or folder) this one starts from
    # The planner's time for the training (plan.TimeEstimate: seconds, what, upper_bound), set by `rocmft train`'s
    # plan check: RUNTIME=slurm compares its time limit with it. None when no plan ran or it gave no time.
    planned_time: object | None = None


def _int_option(value, name: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if number < 1:
        raise ProblemReport([Problem("", name, f"must be a whole number >= 1, got `{value}`")])
    return number


def prepare(
    recipe_spec: str,
    overrides: Iterable[str] = (),
    *,
    arch: str | None = None,
    nodes: str | int | None = None,
    gpus: str | None = None,
    resume: str | None = None,
    start_from: str | None = None,
    run_name: str | None = None,
    validate: bool = True,
    validate_in: Callable[[arches.Arch], "Place"] | None = None,
    env: Mapping[str, str] | None = None,
    need_model: bool = False,
    job: bool = False,
    remember: bool = True,
    mounted: Callable[[arches.Arch], bool] | None = None,
) -> Prepared:
    """`validate_in(arch)` says where the stack checks run (`validate.where`); default: here or the arch's image.
    `need_model`: a job will load the model, so a Hub id must be in the HF cache or downloadable by it
    (`validate.model`: the cache, HF_HUB_OFFLINE, the Hub's answer); render and plan only read files.
    `job`: a job will run the recipe (train, bench): its remote code and the endpoints and loaders its env sets
    need the user's opt-in (`run_trust`, `recipe_env`), as for every other command that runs a model.
    `remember=False` (a dry run): a valid verdict is not written to the validation cache.
    `mounted(arch)`: the runtime bind-mounts the recipe's paths (docker, slurm): they are judged first
    (launch/mountable.py), before validation in the arch's image asks the daemon anything."""
    env = os.environ if env is None else env
    overrides = list(overrides)
    if arch:
        overrides.append(f"arch={arch}")
    if nodes is not None and str(nodes) != "":
        overrides.append(f"nodes={_int_option(nodes, 'NODES')}")
    explicit = launch_plan.parse_gpus(gpus)
    if explicit:
        overrides.append(f"gpus_per_node={len(explicit)}")  # GPUS=2,3 means two processes
    recipe = recipes.load(recipe_spec, overrides)
    start = None
    start_from = start_from or (chain.resumed_source(resume, recipe.name) if resume else None)
    if start_from:  # the earlier run's model (and adapter, and template) replace the recipe's
        start = chain.resolve(start_from, recipe)
        recipe = recipes.load(recipe_spec, overrides + start.overrides)
    arch_info = arches.get(recipe.arch, file=recipe.path)
    selected = explicit or (launch_plan.devices_from_env(env) if arch_info.is_gpu else None)
    resume_from, skipped, resumed_notes = None, [], []
    if resume:
        checkpoint, skipped = runs.resume_checkpoint(resume, recipe.name)
        resume_from = runs.relative(checkpoint)
        resumed_notes = run_trust.foreign_notes(checkpoint.parents[1], "RESUME")  # run/output/checkpoint-N
    # A world size other than the recipe file's (GPUS=, NODES=, SET=gpus_per_node) changes its global batch;
    # a checkpoint written by another number of DeepSpeed ranks does not load.
    written = recipes.load(recipe_spec)
    early = skipped + layout.batch_problems(recipe, written, layout.user_batch_overrides(overrides))
    early += layout.resume_problems(recipe, resume_from, paths.root()) + resumed_notes
    if job:
        early += _job_trust(recipe, env)
    run_dir = runs.choose(recipe.name, run_name)
    run_path = runs.relative(run_dir)
    if job:  # a tracker without its key exported: what it does instead (W&B: offline into the run dir)
        trackers = [t for t in tracking.names(recipe.llamafactory.get("report_to"), arch_info.image_packages)
                    if tracking.PACKAGES.get(t) in arch_info.image_packages]  # the others are refused below
        early += tracking.key_warnings(runs.relative(Path(recipe.path)), trackers, env, f"{run_path}/{JOB_DIR}")
    validated_in = ""
    try:  # every problem at once: the batch/resume ones together with rendering's and validation's
        rendered = render.render(recipe, run_path, resume_from)
        if mounted is not None and mounted(arch_info):
            from .launch import mountable

            raise_if_errors(mountable.recipe_problems(recipe.env, rendered.args, str(paths.root()), env))
        messages = early + list(rendered.warnings)
        if validate or need_model:  # before the checks that look for it
            raise_if_errors(_build_tiny_model(recipe, rendered))
        if validate:
            from .validate import where

            place = (validate_in or where.auto)(arch_info)
            kept, cached = _validate(recipe, rendered, run_path, place, remember=remember)
            messages += kept
            if place.kind != "none":
                validated_in = place.label + (" (cached: same files, stack and code)" if cached else "")
        if need_model and not any(p.severity == "error" for p in messages):  # the Hub is asked about a valid run only
            messages += raise_if_errors(_model_problems(recipe, rendered, env))
    except ProblemReport as report:
        raise ProblemReport(early + report.problems) from None
    messages = raise_if_errors(messages) + _first_run_notes(rendered) + (start.notes if start else [])
    return Prepared(recipe, arch_info, rendered, run_dir, run_path, selected, resume_from, messages, validated_in,
                    start)


def _job_trust(recipe: recipes.Recipe, env: Mapping[str, str]) -> list[Problem]:
    file = runs.relative(Path(recipe.path))
    exported = [n for n in (*recipes.SECRET_ENV, *recipe.secrets) if env.get(n)]
    return (run_trust.recipe_remote_code(file, recipe.llamafactory, env)
            + recipe_env.problems(file, recipe.env, env, exported))


def _model_key(recipe: recipes.Recipe) -> tuple[str, str]:
    return runs.relative(Path(recipe.path)), "llamafactory.model_name_or_path"


def _build_tiny_model(recipe: recipes.Recipe, rendered: render.Rendered) -> list[Problem]:
    """A recipe naming models/tiny-llama trains in a fresh clone: the model is built here, as `make demo` does."""
    from . import tiny_model

    def image() -> tuple[str | None, str]:  # a light host: the arch's image builds it (RUNTIME=docker runs there)
        from .validate import where

        place, why = where._local_image(arches.get(recipe.arch, file=recipe.path))
        return (place.ref if place else None), why

    file, key = _model_key(recipe)
    return tiny_model.ensure(str(rendered.args.get("model_name_or_path") or ""), paths.root(), file=file, key=key,
                             image=image)


def _model_problems(recipe: recipes.Recipe, rendered: render.Rendered, env: Mapping[str, str]) -> list[Problem]:
    from .plan.models import table_names
    from .validate import model

    file, key = _model_key(recipe)
    return model.check(str(rendered.args.get("model_name_or_path") or ""), paths.root(), env, file=file, key=key,
                       known=tuple(table_names()), revision=str(rendered.args.get("model_revision") or "main"))


def _first_run_notes(rendered: render.Rendered) -> list[Problem]:
    """What a user would otherwise take for a hang: CPU offload's first run compiles DeepSpeed's CPU Adam."""
    import json

    zero = json.loads(rendered.ds_config or "{}").get("zero_optimization", {})
    if str(zero.get("offload_optimizer", {}).get("device", "none")).lower() != "cpu":
        return []
    return [Problem("", "deepspeed", "the optimizer is offloaded to the CPU: the first such run on this host compiles "
                    "DeepSpeed's CPU Adam for its CPU (once, a minute or two; cached in TORCH_EXTENSIONS_DIR)",
                    severity="note")]


def validate_rendered(recipe: recipes.Recipe, rendered: render.Rendered, run_path: str, place=None) -> list[Problem]:
    """LLaMA-Factory's and DeepSpeed's own checks where the job's versions are (`place`), then the inputs on
    disk. A cache keyed on the inputs, on what judged them (venv versions, image id) and on the rocmft code
    that ran the checks skips the ~8 s import for unchanged inputs; a rebuilt image or changed code re-validates."""
    return _validate(recipe, rendered, run_path, place)[0]


def _validate(recipe: recipes.Recipe, rendered: render.Rendered, run_path: str, place=None,
              remember: bool = True) -> tuple[list[Problem], bool]:
    """(the problems that are not errors, whether the stack's verdict came from the cache)."""
    from . import validate
    from .validate import inputs, where
    from .validate import request as req

    place = place or where.auto(arches.get(recipe.arch, file=recipe.path))
    source = runs.relative(Path(recipe.path))
    train_label, ds_label = f"{source} -> train.yaml", f"{source} -> ds_config.json"
    found = inputs.check(rendered.args, train_label, paths.root())  # cheap, and files change: always
    code = validate.code_digest(validate.judging_source(place.kind, paths.root()), paths.arches_file())
    key = validate.cache_key(rendered.train_yaml.replace(run_path, "<run>"),
                             (rendered.ds_config or "").replace(run_path, "<run>"), recipe.arch, str(recipe.world_size),
                             stack=place.stack, code=code)
    if place.kind != "none" and validate.already_valid(key):
        return raise_if_errors(found), True
    data = req.request(rendered.args, rendered.ds_config, recipe.arch, recipe.world_size, train_label, ds_label)
    stack = where.run(place, data, paths.root(), key)
    kept = raise_if_errors(sorted(stack + found, key=lambda p: p.severity != "error"))
    if place.kind != "none" and remember:
        validate.remember_valid(key)
    return kept, False
