"""The LoRA post's configuration, imported by `make import` (its YAML and its launch line), trains for real on
CPU with the tiny model swapped in by `make train SET=...` (`pytest -m train`). Everything happens in a
project root of the test's own (ROCMFT_ROOT), so the checkout's recipes/ is never touched."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.conftest import ROOT, offline_env
from tests.unit.importer.conftest import SEEDS, make_project

pytestmark = pytest.mark.train

POST = SEEDS / "rocm-lora-low-cost"
# The post's model, template, data and arch swapped for the tiny ones; two optimizer steps.
SWAP = ("model_name_or_path=models/tiny-llama template=llama3 dataset=demo_alpaca arch=cpu max_steps=2 "
        "logging_steps=1 preprocessing_num_workers=1")


def make(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                          check=False)


def test_the_imported_lora_post_trains_on_cpu(tmp_path, tiny_model):
    project = make_project(tmp_path / "project")
    env = offline_env(tmp_path, ROCMFT_ROOT=str(project))
    imported = make("import", f"FILE={POST / 'lora_rocm.yaml'}", "ARCH=gfx1100", f"CMD={(POST / 'launch.sh').read_text()}",
                    "TO=seed-lora", env=env)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "train it: make train RECIPE=seed-lora GPUS=0" in imported.stdout

    trained = make("train", "RECIPE=seed-lora", "RUNTIME=local", "RUN_NAME=seed-lora-cpu", f"SET={SWAP}", env=env)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    run = tmp_path / "runs" / "seed-lora-cpu"
    assert (run / "output" / "adapter_model.safetensors").is_file()
    steps = [json.loads(line) for line in (run / "output" / "trainer_log.jsonl").read_text().splitlines()]
    assert [s["current_steps"] for s in steps if "loss" in s] == [1, 2]
    # what LLaMA-Factory read: the post's own settings where they survive, none of its mistakes
    args = yaml.safe_load((run / "train.yaml").read_text())
    assert args["lora_target"] == "q_proj,v_proj" and args["finetuning_type"] == "lora"
    assert args["learning_rate"] == 1e-4 and args["warmup_steps"] == 0.1 and "warmup_ratio" not in args and args["overwrite_cache"] is True
    assert args["bf16"] is False and args["fp16"] is False  # precision auto on cpu: fp32
    for key in ("gpu_ids", "infer_backend", "torch_dtype", "ddp_backend"):
        assert key not in args
    assert args["output_dir"] == str(run / "output")  # rocmft's run dir, not the post's ./saves/qwen25-lora-rocm
