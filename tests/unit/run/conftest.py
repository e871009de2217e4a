"""Run directories as `make train` leaves them, written by hand: what the serve code reads is files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rocmft.recipe import recipes

TRAIN = {"stage": "sft", "finetuning_type": "lora", "model_name_or_path": "models/tiny-llama", "template": "llama3",
         "dataset": "demo_alpaca", "flash_attn": "sdpa", "save_steps": 6, "output_dir": "<run>/output"}


def make_run(runs: Path, name: str, *, state="succeeded", arch="cpu", runtime="local", adapter=True,
             checkpoints=(), merged=False, **train) -> Path:
    run = runs / name
    (run / "output").mkdir(parents=True)
    data = {**TRAIN, **train, "output_dir": str(run / "output")}
    data = {k: v for k, v in data.items() if v is not None}
    (run / "train.yaml").write_text(yaml.safe_dump(data))
    resolved = recipes.load("tiny-cpu", [f"arch={arch}"]).to_dict()  # as the run's status names it
    (run / "recipe.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    (run / "status.json").write_text(json.dumps({"recipe": "tiny-cpu", "arch": arch, "state": state,
                                                  "runtime": runtime, "started": 1.0, "ended": 2.0}))
    if adapter:
        (run / "output" / "adapter_model.safetensors").write_bytes(b"x")
    for step in checkpoints:
        folder = run / "output" / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "adapter_model.safetensors").write_bytes(b"x")
        (folder / "config.json").write_text("{}")
    if merged:
        (run / "merged").mkdir()
        (run / "merged" / "config.json").write_text("{}")
    return run


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setenv("ROCMFT_RUNS", str(runs))
    return runs
