"""Recipe + arch -> the files LLaMA-Factory and DeepSpeed read, through sandboxed Jinja templates.

Rendering is pure: the same recipe, arch and run path give the same bytes (no clock, no host facts), so a
rendered file can be diffed and reproduced. Paths inside are relative to the project root, where every
runtime (local, Docker, Slurm, Kubernetes) starts the job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from .. import __version__
from ..hardware import arches
from ..io import paths
from ..io.problems import Problem, raise_if_errors
from ..io.safe_text import one_line
from . import ds_presets, hub_push, precision, rules
from .recipes import Recipe

TRAIN_TEMPLATE = "train.yaml.j2"


@dataclass(frozen=True)
class Rendered:
    train_yaml: str
    ds_config: str | None  # JSON text, or None without DeepSpeed
    args: dict[str, Any]  # what train_yaml holds, as data
    precision: precision.Precision
    warnings: list[Problem] = field(default_factory=list)


def _to_yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


def environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        loader=FileSystemLoader([str(paths.templates_dir()), str(paths.ds_configs_dir())]),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["to_yaml"] = _to_yaml
    env.filters["tojson"] = lambda v: json.dumps(v)
    env.filters["comment"] = one_line  # a value in a `#` line: a newline would start a real key or command
    return env


def train_args(recipe: Recipe, run_path: str, prec: precision.Precision, resume_from: str | None) -> dict[str, Any]:
    """The LLaMA-Factory arguments: the recipe's block, then what rocmft owns, in a stable order."""
    arch = arches.get(recipe.arch)
    args = dict(recipe.llamafactory)
    args.setdefault("flash_attn", arch.attention)
    args["output_dir"] = f"{run_path}/output"
    args["bf16"] = prec.bf16
    args["fp16"] = prec.fp16
    if recipe.deepspeed != "none":
        args["deepspeed"] = f"{run_path}/ds_config.json"
    if recipe.nodes > 1:
        # every node would otherwise preprocess the dataset into the shared cache at the same time
        args.setdefault("data_shared_file_system", True)
    if resume_from:
        args["resume_from_checkpoint"] = resume_from
    hub_push.render_default(args)
    return args


def render(recipe: Recipe, run_path: str, resume_from: str | None = None) -> Rendered:
    """`run_path`: the run directory relative to the project root (e.g. runs/tiny-cpu-20261202-101500)."""
    arch = arches.get(recipe.arch, file=recipe.path)
    prec, problems = precision.resolve(recipe.precision, arch, recipe.path,
                                       use_cpu=recipe.llamafactory.get("use_cpu") is True)
    args = train_args(recipe, run_path, prec, resume_from)
    env = environment()
    ds_config = None
    if recipe.deepspeed_file:
        ds_config = ds_presets.render_file(Path(recipe.deepspeed_file), recipe.path)
    elif recipe.deepspeed != "none":
        text = env.get_template(f"{recipe.deepspeed}.json.j2").render(bf16=prec.bf16, fp16=prec.fp16)
        # Normalise through json: one canonical layout whatever the template's whitespace.
        ds_config = json.dumps(json.loads(text), indent=2) + "\n"
    # Combinations a source says break on the GPU: refused, or rendered valid (and said so in the file).
    ruled = rules.apply(args, ds_config, recipe.path)
    warnings = raise_if_errors(problems + ruled)
    ruled = [p for p in ruled if p in warnings]
    train_yaml = env.get_template(TRAIN_TEMPLATE).render(
        version=__version__, recipe=recipe.name, arch=arch.name, precision=prec,
        run_path=run_path, args=args, rules=[f"{p.key}: {p.message}" for p in ruled],
    )
    return Rendered(train_yaml, ds_config, args, prec, warnings)
