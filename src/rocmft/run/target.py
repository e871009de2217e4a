"""A run dir -> what to load for chatting with it: never guessed, read from what the run wrote.

- the template is the one the run trained with (`train.yaml`); a run without one is refused;
- a LoRA run is its base model + `output/` (the adapter), or `merged/` when `make export` wrote it; a run
  that stopped after a save but before the end gets its last checkpoint, with a note saying so; a run started
  FROM an earlier run's adapter (SFT, then DPO) loads that adapter first, then its own;
- a full (or freeze) fine-tune's `output/` is the model itself;
- arch and runtime are the run's own (status.json), so a GPU run is served in its arch's image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..io.problems import Problem, ProblemReport
from . import runs
from .adapters import upstream_adapters

ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")
# Training keys that shape how the model is built or prompted, so inference must use the same values.
CARRIED = ("trust_remote_code", "flash_attn", "rope_scaling", "quantization_bit", "quantization_method",
           "default_system", "enable_thinking", "tool_format")
# A merged export holds full weights in the training dtype: no quantized loading of it.
NOT_FOR_MERGED = ("quantization_bit", "quantization_method")


@dataclass(frozen=True)
class Target:
    run_dir: Path
    run_path: str  # as the job sees it: relative to the project root when inside it
    name: str
    arch: str
    trained_runtime: str  # local | docker | slurm | k8s (what status.json says)
    model: str  # model_name_or_path for LLaMA-Factory
    adapter: str | None  # adapter_name_or_path, None for a merged or full model
    template: str
    source: str  # adapter | checkpoint | merged | full
    carried: dict[str, Any] = field(default_factory=dict)
    notes: tuple[Problem, ...] = ()

    @property
    def what(self) -> str:
        """One phrase for the terminal: what is loaded."""
        if self.adapter:
            return f"{self.model} + adapter {self.adapter}"
        return f"{self.model} ({'merged export' if self.source == 'merged' else 'full fine-tune'})"


def _has_adapter(folder: Path) -> bool:
    return any((folder / name).is_file() for name in ADAPTER_FILES)


def _has_model(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def load(run_dir: Path) -> Target:
    """What to load for this run, or one Problem saying why there is nothing to talk to."""
    run_path = runs.relative(run_dir)
    try:
        train = yaml.safe_load((run_dir / "train.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ProblemReport([Problem(f"{run_path}/train.yaml", "", f"cannot read it: {exc}")]) from None
    status = runs.read_status(run_dir)
    resolved = _read_yaml(run_dir / "recipe.resolved.yaml")
    arch = str(status.get("arch") or resolved.get("arch") or "cpu")
    trained_runtime = str(status.get("runtime") or _read_json(run_dir / "versions.json").get("runtime") or "")
    state = status.get("state", "rendered")

    template = train.get("template")
    if not template:
        raise ProblemReport([Problem(f"{run_path}/train.yaml", "template",
                                     "the run names no chat template, and rocmft never guesses one",
                                     "set `template:` in the recipe's llamafactory block and train again")])
    ftype = str(train.get("finetuning_type", "lora"))
    carried = {k: train[k] for k in CARRIED if train.get(k) is not None}
    notes: list[Problem] = []
    output = run_dir / "output"
    latest = [c for c in reversed(runs.checkpoints(run_dir))]

    if ftype == "lora":
        merged = run_dir / "merged"
        if _has_model(merged):
            carried = {k: v for k, v in carried.items() if k not in NOT_FOR_MERGED}
            return Target(run_dir, run_path, run_dir.name, arch, trained_runtime, f"{run_path}/merged", None,
                          str(template), "merged", carried, ())
        model = str(train.get("model_name_or_path") or "")
        # A run started FROM an earlier run's adapter trained its own on top of that one, merged: both load, in order.
        below = upstream_adapters(train)
        if _has_adapter(output):
            return Target(run_dir, run_path, run_dir.name, arch, trained_runtime, model,
                          ",".join([*below, f"{run_path}/output"]), str(template), "adapter", carried, ())
        saved = next((c for c in latest if _has_adapter(c)), None)
        if saved is not None:
            notes.append(Problem("", "RUN", f"{run_path} ended {state} before its final save: using its last "
                                 f"checkpoint, {saved.name}", severity="note"))
            return Target(run_dir, run_path, run_dir.name, arch, trained_runtime, model,
                          ",".join([*below, f"{run_path}/output/{saved.name}"]), str(template), "checkpoint",
                          carried, tuple(notes))
        raise ProblemReport([_nothing_saved(run_path, state, "adapter", train)])

    if _has_model(output):
        return Target(run_dir, run_path, run_dir.name, arch, trained_runtime, f"{run_path}/output", None,
                      str(template), "full", carried, ())
    saved = next((c for c in latest if _has_model(c)), None)
    if saved is not None:
        notes.append(Problem("", "RUN", f"{run_path} ended {state} before its final save: using its last "
                             f"checkpoint, {saved.name}", severity="note"))
        return Target(run_dir, run_path, run_dir.name, arch, trained_runtime, f"{run_path}/output/{saved.name}",
                      None, str(template), "checkpoint", carried, tuple(notes))
    raise ProblemReport([_nothing_saved(run_path, state, "model", train)])


def _nothing_saved(run_path: str, state: str, what: str, train: dict) -> Problem:
    when = {"running": "is still running and has not saved yet",
            "rendered": "was rendered but never trained"}.get(state, f"ended {state} before its first save")
    every = f" (it saves every {train['save_steps']} steps)" if train.get("save_steps") else ""
    return Problem("", "RUN", f"{run_path} has no {what} to load: the run {when}{every}",
                   "pick a run that saved one: `make runs`")


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, yaml.YAMLError):
        return {}


def _read_json(path: Path) -> dict:
    import json

    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
