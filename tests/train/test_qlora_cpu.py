"""QLoRA for real on CPU (`pytest -m train`): tiny-cpu-qlora loads the tiny model in 4 bits through LLaMA-Factory
(bitsandbytes 0.50.2's CPU backend: NF4 Linear4bit forward and backward), its loss falls, `make chat` answers from
the 4-bit base + adapter, and `make export` merges the adapter into the unquantised base (LLaMA-Factory refuses to
merge into a quantised model), which loads and answers the same. One training run for the module."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rocmft.data.demo_content import DEMO_QUESTION, IDENTITY_ANSWER
from tests.conftest import ROOT, make_env

pytestmark = pytest.mark.train

# Greedy and long enough for the whole sentence (the tiny tokenizer spends ~2 tokens a word).
GENERATION = "SET=max_new_tokens=64 do_sample=false"


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return make_env(tmp_path_factory.mktemp("qlora"))


@pytest.fixture(scope="module")
def run(env) -> Path:
    proc = subprocess.run(["make", "-s", "train", "RECIPE=tiny-cpu-qlora", "RUNTIME=local", "RUN_NAME=qlora"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return Path(env["ROCMFT_RUNS"]) / "qlora"


def make(env, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def chat(env, run: Path) -> subprocess.CompletedProcess:
    proc = make(env, "chat", f"RUN={run}", f"PROMPT={DEMO_QUESTION}", GENERATION)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc


def test_the_base_is_loaded_in_4_bits_and_the_loss_falls(run):
    train = yaml.safe_load((run / "train.yaml").read_text())
    assert (train["quantization_bit"], train["quantization_type"], train["double_quantization"]) == (4, "nf4", True)
    assert train["bf16"] is False and train["fp16"] is False  # compute dtype fp32 on CPU
    log = (run / "train.log").read_text()
    assert "Quantizing model to 4 bit with bitsandbytes." in log  # LLaMA-Factory's own line
    losses = [json.loads(line)["loss"] for line in (run / "output" / "trainer_log.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]
    assert len(losses) == train["max_steps"] // train["logging_steps"]
    assert sum(losses[-3:]) / 3 < losses[0] / 2, losses
    assert json.loads((run / "status.json").read_text())["state"] == "succeeded"


def test_chat_from_the_4bit_base_and_the_merged_export_answer_the_same(env, run):
    quantised = chat(env, run)
    assert f"{run}/output, template llama3" in quantised.stderr  # base + adapter, quantization_bit carried
    answer = quantised.stdout.strip()
    assert answer == IDENTITY_ANSWER, answer

    copy = run.with_name("qlora-merged")
    shutil.copytree(run, copy)  # export writes merged/ into the run
    exported = make(env, "export", f"RUN={copy}")
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "merged into the unquantised base" in exported.stdout, exported.stdout
    export_yaml = yaml.safe_load((copy / "export.yaml").read_text())
    assert "quantization_bit" not in export_yaml  # LLaMA-Factory: "Cannot merge adapters to a quantized model."
    config = json.loads((copy / "merged" / "config.json").read_text())
    assert "quantization_config" not in config

    from safetensors import safe_open

    with safe_open(str(copy / "merged" / "model.safetensors"), "pt") as f:
        dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    assert dtypes == {"F32"}, dtypes  # plain weights: no packed 4-bit (U8) tensors, no absmax blocks

    merged = chat(env, copy)
    assert f"{copy}/merged (merged export)" in merged.stderr
    assert merged.stdout.strip() == answer
