"""Judging both ends of an import with the project's own checks: the user's files as `rocmft validate` judges
them (LLaMA-Factory's parser, DeepSpeed's config model, the inputs on disk), the written recipe rendered and
validated like a shipped one, and the planner's verdict for the arch.

LLaMA-Factory's and DeepSpeed's checks run where the caller's `validate.where.auto` place says: this venv when
it has the training stack, else the arch's image; when neither is at hand they are reported as not run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from ..hardware.arches import Arch
from ..io import paths
from ..io.problems import Problem, ProblemReport
from ..recipe import render
from ..recipe.recipes import Recipe
from ..run import runs
from ..validate import inputs, where
from ..validate import request as req


def _stack(data: dict[str, Any], place: where.Place) -> list[Problem]:
    key = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    return where.run(place, data, paths.root(), key)


def source(args: dict[str, Any], ds_cfg: dict[str, Any] | None, arch: Arch, world: int, file: str,
           ds_file: str, place: where.Place) -> list[Problem]:
    """Every problem of the user's YAML (+ JSON) for the arch and world size they will run on."""
    data = req.request(args, json.dumps(ds_cfg) if ds_cfg is not None else None, arch.name, world, file, ds_file)
    return _stack(data, place) + inputs.check(args, file, paths.root())


def recipe(rec: Recipe, arch: Arch, place: where.Place) -> tuple[list[str], list[Problem]]:
    """(what validating the written recipe said, what is missing on disk before it can train).
    A recipe that does not render or validate raises: the import writes nothing then."""
    run_path = f"runs/{rec.name}-imported"
    rendered = render.render(rec, run_path)
    label = runs.relative(Path(rec.path))
    data = req.request(rendered.args, rendered.ds_config, arch.name, rec.world_size, f"{label} -> train.yaml",
                       f"{label} -> ds_config.json")
    found = _stack(data, place)
    errors = [p for p in found if p.severity == "error"]
    if errors:
        raise ProblemReport(errors)
    said = [f"rendered and checked by LLaMA-Factory and DeepSpeed in {place.label}"] if place.kind != "none" else []
    said += [p.line() for p in [*rendered.warnings, *found] if p.severity == "warning"]
    return said, inputs.check(rendered.args, label, paths.root())


def plan(rec: Recipe) -> list[str]:
    """The planner's summary for the recipe, and a note when its CPU offload buys memory it does not need."""
    from .. import plan as planner

    result = planner.check(rec)
    lines = result.summary.splitlines()
    w = result.workload
    if w is None or not w.offload:
        return lines
    without = planner.check(dataclasses.replace(rec, deepspeed="zero3", deepspeed_file=""))
    if without.verdict != "fits" or without.memory is None:
        return lines
    faster = ""
    a, b = result.throughput, without.throughput
    if a and b and a.tokens_per_s_gpu and b.tokens_per_s_gpu:
        ratio = sum(b.tokens_per_s_gpu) / sum(a.tokens_per_s_gpu)
        faster = f", ~{ratio:.1f}x the tokens/s" if ratio >= 1.1 else ""
    product = w.product or w.arch
    lines.append(f"note: CPU offload is not needed on {product}: without it (ZeRO-3 alone) the plan fits with "
                 f"{without.memory.spare_gib:.0f} GiB spare per GPU{faster}; the offloaded states cost "
                 f"~{result.memory.host_gib_per_node:.0f} GiB of host RAM per node and PCIe time every step  "
                 "[SET=\"deepspeed=zero3\"]")
    return lines
