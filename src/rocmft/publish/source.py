"""Which folder of a run holds the model to publish, and whether the run finished: read from what the run wrote.

A LoRA run's model is its merged export (`merged/`, written by `make export`); a full or freeze fine-tune's
`output/` is the model itself. Only a run that ended `succeeded` is published: an interrupted or failed run's
output is a checkpoint at best, not what its recipe asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..io.problems import Problem, ProblemReport
from ..run import runs


@dataclass(frozen=True)
class Published:
    run_dir: Path
    run_path: str  # as printed: relative to the project root when inside it
    train: dict[str, Any]  # the run's train.yaml
    state: str

    @property
    def lora(self) -> bool:
        return str(self.train.get("finetuning_type", "lora")) == "lora"

    @property
    def quantized(self) -> bool:
        return bool(self.train.get("quantization_bit"))

    @property
    def model_dir(self) -> Path:
        """The full model's folder: `merged/` (a LoRA run, once merged) or `output/` (a full fine-tune)."""
        return self.run_dir / ("merged" if self.lora else "output")

    @property
    def has_model(self) -> bool:
        return (self.model_dir / "config.json").is_file()


def load(spec: str) -> Published:
    run_dir = runs.find(spec)
    run_path = runs.relative(run_dir)
    try:
        train = yaml.safe_load((run_dir / "train.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ProblemReport([Problem(f"{run_path}/train.yaml", "", f"cannot read it: {exc}")]) from None
    return Published(run_dir, run_path, train if isinstance(train, dict) else {},
                     str(runs.read_status(run_dir).get("state") or "rendered"))


def unfinished(run: Published) -> list[Problem]:
    if run.state == "succeeded":
        return []
    return [Problem("", "RUN", f"{run.run_path} did not finish (status: {run.state}): there is no final model to "
                    "publish", "`make runs` shows it; `make train RESUME=...` continues an interrupted run")]


def architecture(folder: Path) -> str | None:
    """The model class its config.json names (`LlamaForCausalLM`), None when there is no readable one."""
    try:
        names = json.loads((folder / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None
    return str(names[0]) if names else None
