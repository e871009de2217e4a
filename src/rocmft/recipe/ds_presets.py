"""A recipe's `deepspeed:`: a shipped preset (ds_configs/<name>.json.j2) or the recipe's own JSON file.

A user's DeepSpeed JSON that no shipped preset matches in what matters (ZeRO stage, offload targets, optimizer
and scheduler blocks) is kept as a file next to the recipe (`deepspeed: my-recipe.ds.json`, written by
`rocmft import`). Both kinds render to the run's ds_config.json and are validated the same way; the planner
models a file as the shipped preset of its shape (`planned_as`) with the file's own bucket sizes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..io import paths
from ..io.problems import Problem, ProblemReport

FILE_SUFFIX = ".json"


def is_file(value: Any) -> bool:
    return isinstance(value, str) and value.endswith(FILE_SUFFIX)


def shipped() -> list[str]:
    """The shipped presets, as on disk (a preset added to ds_configs/ is one more candidate)."""
    return sorted(p.name[: -len(".json.j2")] for p in paths.ds_configs_dir().glob("*.json.j2") if not p.name.startswith("_"))


def find_file(value: str, recipe_file: str) -> Path | None:
    """A recipe's JSON: next to the recipe file, else in recipes/ (where `rocmft import` writes it)."""
    for folder in (Path(recipe_file).parent, paths.recipes_dir()):
        if (folder / value).is_file():
            return (folder / value).resolve()
    return None


def read_file(path: Path, recipe_file: str = "") -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ProblemReport([Problem(str(path), "", f"not valid JSON: line {exc.lineno}: {exc.msg}")]) from None
    except OSError as exc:
        raise ProblemReport([Problem(recipe_file, "deepspeed", f"cannot read {path}: {exc.strerror}")]) from None
    if not isinstance(data, dict):
        raise ProblemReport([Problem(str(path), "", "a DeepSpeed config must be a JSON object")])
    return data


def render_file(path: Path, recipe_file: str = "") -> str:
    """A recipe's own JSON as the run's ds_config.json: the same canonical layout as a rendered preset."""
    return json.dumps(read_file(path, recipe_file), indent=2) + "\n"


def shape(cfg: Mapping[str, Any]) -> tuple[int, str, str]:
    """What decides how DeepSpeed lays out the states: (ZeRO stage, optimizer offload device, weights offload device)."""
    zero = cfg.get("zero_optimization") if isinstance(cfg.get("zero_optimization"), Mapping) else {}

    def device(section: str) -> str:
        block = zero.get(section)
        return str(block.get("device", "none")).lower() if isinstance(block, Mapping) else "none"

    stage = zero.get("stage", 0)
    return (stage if isinstance(stage, int) and not isinstance(stage, bool) else -1,
            device("offload_optimizer"), device("offload_param"))


def planned_as(cfg: Mapping[str, Any]) -> str:
    """The shipped preset name whose shape the planner models for a JSON of this shape."""
    stage, optimizer, params = shape(cfg)
    if stage == 3 and params != "none":
        return "zero3-offload"
    if stage == 3 and optimizer != "none":
        return "zero3-offload-optimizer"
    return {0: "zero0", 1: "zero1", 2: "zero2", 3: "zero3"}.get(stage, "zero0")
