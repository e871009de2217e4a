"""Recipes: load a YAML file, inherit its `base:` chain, apply `key=value` overrides -> one `Recipe`.

A recipe has a few project-level fields (where and how to run) and a `llamafactory:` block passed to
LLaMA-Factory verbatim. Everything here is pure YAML handling: no torch, no LLaMA-Factory.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ..hardware import arches
from ..io import datadirs, paths
from ..io.problems import Problem, ProblemReport, did_you_mean, raise_if_errors
from ..io.yamlio import parse_yaml
from . import ds_presets
from .overrides import apply_overrides, parse_overrides

DEEPSPEED_PRESETS = ("none", "zero0", "zero2", "zero3", "zero3-replicated", "zero3-offload-optimizer", "zero3-offload")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
PROJECT_KEYS = (
    "base", "description", "arch", "gpus_per_node", "nodes", "deepspeed", "precision",
    "watchdog", "resilience", "env", "secrets", "plan", "llamafactory",
)
WATCHDOG_KEYS = ("enabled", "grad_norm_max", "grad_norm_patience", "loss_rise_factor", "min_steps",
                 "reward_margin_max", "logp_collapse_factor")
# What a stop, a preemption or a lost process does (docs/multinode.md): each key, its least and greatest value.
# 65535: the most seconds Slurm's --signal=<sig>@<seconds> takes.
RESILIENCE_KEYS = {"stop_grace_s": (10, 65535), "max_restarts": (0, 100), "max_requeues": (0, 1000)}
RESILIENCE_DEFAULTS = {"stop_grace_s": 300, "max_restarts": 0, "max_requeues": 3}
# Environment variables that carry credentials: passed from the user's shell at launch, never stored.
# A recipe's `secrets:` names more (names only; the values stay in the shell).
# MLflow's own client reads its server's credentials from the MLFLOW_TRACKING_* three.
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "MODELSCOPE_API_TOKEN",
              "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
# What looks like a credential, as an `env:` name or a LLaMA-Factory argument (hub_token, swanlab_api_key, ...):
# never written into a recipe, a rendered file or a log.
CREDENTIAL = re.compile(r"(token|key|password|passwd)$|secret", re.IGNORECASE)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A recipe's name (its file name) goes into run dir names, Slurm job names, Kubernetes labels and the header
# comments of rendered files: one rule for every runtime, so none of them can be written an extra line.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# LLaMA-Factory arguments a recipe must not set itself, with what to use instead. Each is either owned by
# the project (one run dir per run, precision from the arch) or a known-wrong habit from the posts.
RESERVED_LF_KEYS = {
    "output_dir": "set per run by rocmft (runs/<name>/output); name a run with RUN_NAME=",
    "overwrite_output_dir": "refused: it destroys earlier results; every run gets a new directory",
    "deepspeed": "use the recipe's `deepspeed:` preset (none|zero0|zero2|zero3|zero3-replicated|zero3-offload-optimizer|zero3-offload)",
    "bf16": "use the recipe's `precision:` (auto|bf16|fp16|fp32); rocmft renders bf16/fp16 from it",
    "fp16": "use the recipe's `precision:` (auto|bf16|fp16|fp32); rocmft renders bf16/fp16 from it",
    "torch_dtype": "not a LLaMA-Factory training argument: use the recipe's `precision:`",
    "gpu_ids": "not a LLaMA-Factory argument: choose GPUs with GPUS=0,1 and the count with gpus_per_node",
    "resume_from_checkpoint": "use RESUME=<run dir>|last, which checks the checkpoint exists",
}


@dataclass(frozen=True)
class Recipe:
    name: str
    path: str  # the file the user named (first link of the base chain)
    chain: tuple[str, ...]  # the files merged, base first
    arch: str
    gpus_per_node: int
    nodes: int
    deepspeed: str
    precision: str
    description: str = ""
    watchdog: Mapping[str, Any] | None = None
    resilience: Mapping[str, int] = field(default_factory=lambda: dict(RESILIENCE_DEFAULTS))
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()  # names of more credentials passed from the shell, like HF_TOKEN
    plan: Mapping[str, Any] = field(default_factory=dict)
    llamafactory: Mapping[str, Any] = field(default_factory=dict)
    deepspeed_file: str = ""  # `deepspeed: x.json`: the recipe's own DeepSpeed JSON, resolved ("" for a preset)

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    def to_dict(self) -> dict[str, Any]:
        """The fully resolved recipe, as written to a run dir (no `base:`: it is already merged)."""
        return {
            "description": self.description,
            "arch": self.arch,
            "gpus_per_node": self.gpus_per_node,
            "nodes": self.nodes,
            "deepspeed": self.deepspeed,
            "precision": self.precision,
            "watchdog": copy.deepcopy(dict(self.watchdog)) if self.watchdog is not None else False,
            "resilience": dict(self.resilience),
            "env": dict(self.env),
            "secrets": list(self.secrets),
            "plan": copy.deepcopy(dict(self.plan)),
            "llamafactory": copy.deepcopy(dict(self.llamafactory)),
        }


# ---------------------------------------------------------------- finding and reading files

def shipped() -> list[str]:
    """The recipes the project ships (recipes/*.yaml)."""
    return sorted(p.stem for p in paths.recipes_dir().glob("*.yaml"))


def user_recipes() -> list[str]:
    """The user's own recipes (my/recipes/*.yaml: `make copy`, `make import`)."""
    return sorted(p.stem for p in paths.user_recipes_dir().glob("*.yaml"))


def available() -> list[str]:
    """Every recipe a name finds: the shipped ones, then the user's (a user's recipe never shadows a shipped one:
    `make copy` and `make import` refuse a taken name)."""
    mine = [n for n in user_recipes() if n not in set(shipped())]
    return [*shipped(), *mine]


def find(name_or_path: str) -> Path:
    """A recipe name (`llama3-8b-z3`, or one of the user's in my/recipes/) or a path to any recipe file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate.resolve()
    for folder in (paths.recipes_dir(), paths.user_recipes_dir()):
        named = folder / f"{name_or_path}.yaml"
        if named.is_file():
            return named
    known = available()
    hint = did_you_mean(name_or_path, known) or f"known recipes: {', '.join(known)}"
    raise ProblemReport([Problem("", "RECIPE", f"unknown recipe `{name_or_path}`", hint)])


def new_path(name: str | None, suffix: str = ".yaml") -> Path:
    """my/recipes/<name><suffix> for a new file (`make copy`, `make import`): a plain name, so nothing lands
    outside that folder, taken neither there nor among the shipped recipes - a recipe is never overwritten,
    and the user's never shadows a shipped one."""
    if not name or not NAME.fullmatch(name):
        raise ProblemReport([Problem("", "TO", f"`{name or ''}` is not a recipe name", "e.g. TO=my-llama3 (letters, digits, . _ -)")])
    for folder in (paths.recipes_dir(), paths.user_recipes_dir()):
        taken = folder / f"{name}{suffix}"
        if os.path.lexists(taken):  # a dangling link too: what is written there would land where it points
            raise ProblemReport([Problem("", "TO", f"{paths.shown(taken)} exists: not overwritten", "pick another name")])
    target = paths.user_recipes_dir() / f"{name}{suffix}"
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemReport([Problem(str(path), "", "file not found")]) from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProblemReport([Problem(str(path), "", f"YAML syntax error{where}: {what}")]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProblemReport([Problem(str(path), "", f"expected a mapping of keys, got {type(data).__name__}")])
    return data


def _base_path(base: Any, child: Path) -> Path:
    if not isinstance(base, str) or not base:
        raise ProblemReport([Problem(str(child), "base", "must be a file name, e.g. `_base/lora-sft.yaml`")])
    name = base if base.endswith((".yaml", ".yml")) else f"{base}.yaml"
    for folder in (child.parent, paths.recipes_dir(), paths.recipes_dir() / "_base"):
        if (folder / name).is_file():
            return (folder / name).resolve()
    raise ProblemReport([Problem(str(child), "base", f"base `{base}` not found next to the recipe or in recipes/_base/")])


def deep_merge(base: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else in the child replaces the base. `null` deletes a key."""
    merged = copy.deepcopy(dict(base))
    for key, value in child.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_chain(path: Path) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Merge a recipe with its bases, base first. Loops and missing bases are problems."""
    chain: list[Path] = []
    layers: list[dict[str, Any]] = []
    current: Path | None = path.resolve()
    while current is not None:
        if current in chain:
            loop = " -> ".join(p.name for p in (*chain, current))
            raise ProblemReport([Problem(str(path), "base", f"inheritance loop: {loop}")])
        chain.append(current)
        data = read_yaml(current)
        layers.append(data)
        current = _base_path(data["base"], current) if "base" in data else None
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        merged = deep_merge(merged, {k: v for k, v in layer.items() if k != "base"})
    return merged, tuple(str(p) for p in reversed(chain))


# ---------------------------------------------------------------- checking the project-level fields

def _int_field(data: dict, key: str, file: str, problems: list[Problem], minimum: int = 1) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        problems.append(Problem(file, key, f"must be an integer >= {minimum}, got {value!r}"))
        return minimum
    return value


def check(data: dict[str, Any], file: str) -> list[Problem]:
    """Problems with the project-level fields (LLaMA-Factory arguments are judged by LLaMA-Factory)."""
    problems: list[Problem] = []
    for key in data:
        if key not in PROJECT_KEYS:
            hint = did_you_mean(key, PROJECT_KEYS)
            if not hint:
                hint = f"LLaMA-Factory arguments go under `llamafactory:` (llamafactory.{key})"
            problems.append(Problem(file, key, "unknown recipe key", hint))
    arch = data.get("arch")
    arch_info = None
    if arch is None:
        problems.append(Problem(file, "arch", "missing", f"one of: {', '.join(arches.table())}"))
    elif str(arch) not in arches.table():
        problems.append(Problem(file, "arch", f"unknown arch `{arch}`",
                                did_you_mean(str(arch), arches.table()) or f"known arches: {', '.join(arches.table())}"))
    else:
        arch_info = arches.table()[str(arch)]
    gpus = _int_field(data, "gpus_per_node", file, problems)
    _int_field(data, "nodes", file, problems)
    if arch_info and gpus > arch_info.gpus_per_node:
        problems.append(Problem(file, "gpus_per_node", f"{gpus} GPUs asked, but a {arch} node holds at most {arch_info.gpus_per_node}",
                                "use more `nodes:` instead"))
    deepspeed = data.get("deepspeed", "none")
    if ds_presets.is_file(deepspeed):
        if ds_presets.find_file(deepspeed, file) is None:
            problems.append(Problem(file, "deepspeed", f"`{deepspeed}` not found next to the recipe or in recipes/",
                                    f"a preset ({', '.join(DEEPSPEED_PRESETS)}) or a DeepSpeed JSON file there"))
    elif deepspeed not in DEEPSPEED_PRESETS:
        problems.append(Problem(file, "deepspeed", f"unknown preset `{data.get('deepspeed')}`",
                                did_you_mean(str(data.get("deepspeed")), DEEPSPEED_PRESETS)
                                or f"one of: {', '.join(DEEPSPEED_PRESETS)}, or a .json file next to the recipe"))
    if data.get("precision", "auto") not in PRECISIONS:
        problems.append(Problem(file, "precision", f"unknown precision `{data.get('precision')}`", f"one of: {', '.join(PRECISIONS)}"))
    watchdog = data.get("watchdog", True)
    if isinstance(watchdog, dict):
        for key in watchdog:
            if key not in WATCHDOG_KEYS:
                problems.append(Problem(file, f"watchdog.{key}", "unknown watchdog setting",
                                        did_you_mean(key, WATCHDOG_KEYS) or f"known: {', '.join(WATCHDOG_KEYS)}"))
    elif not isinstance(watchdog, bool):
        problems.append(Problem(file, "watchdog", "must be true, false or a mapping of thresholds"))
    problems += _resilience_problems(data.get("resilience", {}), file)
    env = data.get("env") or {}
    if not isinstance(env, dict):
        problems.append(Problem(file, "env", "must be a mapping NAME: value"))
        env = {}
    for name in env:
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            problems.append(Problem(file, f"env.{name!r}", "not an environment variable name",
                                    "letters, digits and _, not starting with a digit"))
        elif CREDENTIAL.search(name):
            problems.append(Problem(file, f"env.{name}", "secrets never go in a recipe",
                                    f"export {name} in your shell and list its name under `secrets:`; rocmft passes it "
                                    "to the job without writing it anywhere"))
    secrets = data.get("secrets") or []
    if not isinstance(secrets, list) or not all(isinstance(n, str) and ENV_NAME.fullmatch(n) for n in secrets):
        problems.append(Problem(file, "secrets", "must be a list of environment variable names",
                                "e.g. secrets: [MY_REGISTRY_TOKEN] (the values stay in your shell)"))
    lf = data.get("llamafactory")
    if not isinstance(lf, dict) or not lf:
        problems.append(Problem(file, "llamafactory", "missing: the LLaMA-Factory arguments of the recipe"))
    else:
        for key, instead in RESERVED_LF_KEYS.items():
            if key in lf:
                problems.append(Problem(file, f"llamafactory.{key}", "not set in a recipe", instead))
        for key in lf:
            if CREDENTIAL.search(str(key)):
                problems.append(Problem(file, f"llamafactory.{key}", "secrets never go in a recipe (train.yaml is kept in the run dir)",
                                        "export the service's own variable (HF_TOKEN, WANDB_API_KEY, ...) in your shell"))
    return problems


def _resilience_problems(value: Any, file: str) -> list[Problem]:
    if not isinstance(value, dict):
        return [Problem(file, "resilience", "must be a mapping", f"keys: {', '.join(RESILIENCE_KEYS)}")]
    problems = []
    for key, setting in value.items():
        if key not in RESILIENCE_KEYS:
            problems.append(Problem(file, f"resilience.{key}", "unknown setting",
                                    did_you_mean(key, RESILIENCE_KEYS) or f"known: {', '.join(RESILIENCE_KEYS)}"))
            continue
        low, high = RESILIENCE_KEYS[key]
        if isinstance(setting, bool) or not isinstance(setting, int) or not low <= setting <= high:
            problems.append(Problem(file, f"resilience.{key}", f"must be a whole number from {low} to {high}, got {setting!r}"))
    return problems


def _watchdog(value: Any) -> Mapping[str, Any] | None:
    if value is False or (isinstance(value, dict) and value.get("enabled") is False):
        return None
    settings = dict(value) if isinstance(value, dict) else {}
    settings.pop("enabled", None)
    return settings


def load(name_or_path: str, overrides: Iterable[str] = ()) -> Recipe:
    path = find(name_or_path)
    if not NAME.fullmatch(path.stem):
        raise ProblemReport([Problem(str(path.parent), "RECIPE", f"`{path.stem}` is not a recipe name",
                                     "rename the file: letters, digits, . _ - (the name goes into run dir and job "
                                     "names and rendered files)")])
    data, chain = load_chain(path)
    data = apply_overrides(data, parse_overrides(overrides, PROJECT_KEYS))
    raise_if_errors(check(data, str(path)))
    deepspeed = data.get("deepspeed", "none")
    ds_file = ds_presets.find_file(deepspeed, str(path)) if ds_presets.is_file(deepspeed) else None
    return Recipe(
        name=path.stem,
        path=str(path),
        chain=chain,
        arch=str(data["arch"]),
        gpus_per_node=int(data["gpus_per_node"]),
        nodes=int(data["nodes"]),
        deepspeed=data.get("deepspeed", "none"),
        precision=data.get("precision", "auto"),
        description=str(data.get("description") or header_comment(path)).strip(),
        watchdog=_watchdog(data.get("watchdog", True)),
        resilience={**RESILIENCE_DEFAULTS, **(data.get("resilience") or {})},
        env={k: str(v) for k, v in (data.get("env") or {}).items()},
        secrets=tuple(data.get("secrets") or ()),
        plan=dict(data.get("plan") or {}),
        llamafactory=datadirs.resolved(data["llamafactory"]),
        deepspeed_file=str(ds_file or ""),
    )


def header_comment(path: Path) -> str:
    """The first comment line of a recipe file: its one-line description for `make list`."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""
