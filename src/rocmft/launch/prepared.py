"""A prepared run (`pipeline.prepare`: rendered and validated, nothing written yet) made ready for a runtime: its
launch plan, and its run dir on disk. Every runtime calls both, so every run is recorded the same way."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..hardware import host
from ..io import hostio
from ..recipe import stages
from ..run import runs
from . import plan as launch_plan

if TYPE_CHECKING:
    from ..pipeline import Prepared


def commit(prep: Prepared, plan: launch_plan.LaunchPlan | None = None, *, runtime: str | None = None,
           image: str | None = None, **versions_extra) -> Path:
    """Create the run dir and write what was asked and what LLaMA-Factory will read; with a launch plan, also
    what will run (plan.json) and with what (versions.json), so every runtime records a run the same way."""
    runs.create(prep.run_dir)
    runs.write_inputs(prep.run_dir, prep.recipe.to_dict(), prep.rendered.train_yaml, prep.rendered.ds_config)
    runs.mark(prep.run_dir, "rendered", recipe=prep.recipe.name, recipe_file=runs.relative(Path(prep.recipe.path)),
              arch=prep.recipe.arch, stage=stages.name(prep.rendered.args), resumed_from=prep.resume_from,
              validated_in=prep.validated_in or None, made_by=prep.made_by, options=prep.options,
              **({"started_from": prep.start.source, "from_spec": prep.start.spec} if prep.start else {}))
    if plan is not None:
        hostio.write_text(prep.run_dir / "plan.json", plan.to_json())
        runs.write_versions(prep.run_dir, image=image, extra={"runtime": runtime, **versions_extra})
    return prep.run_dir


def build_plan(prep: Prepared, *, python: str | None = None, env: Mapping[str, str] | None = None,
               gpus: tuple[str, ...] | None = None, **rendezvous) -> launch_plan.LaunchPlan:
    """`gpus`: the runtime's choice when the user made none (RUNTIME=local: the GPUs of the recipe's arch)."""
    # The launching host's cores: the node itself for local and Docker runs; a Slurm job's nodes are assumed to
    # be like the node it is submitted from (a recipe's `env: {OMP_NUM_THREADS: ...}` says otherwise).
    return launch_plan.build(prep.recipe, prep.arch, prep.run_path, os.environ if env is None else env,
                             python=python or sys.executable, gpus=gpus or prep.gpus,
                             physical_cores=host.physical_cores(), **rendezvous)
