"""`rocmft validate FILE --arch NAME` on a plain LLaMA-Factory YAML (not a recipe), by LLaMA-Factory's own parser.

Host-dependent checks (bf16 needs a GPU with bf16) are judged for --arch when given; without it they are a
note, so LLaMA-Factory's own example shape validates on a CPU-only laptop or CI machine."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import rocmft

# The shape of LLaMA-Factory's examples/train_lora/llama3_lora_sft.yaml (minus overwrite_output_dir, which
# rocmft refuses), on this project's registered demo dataset.
EXAMPLE = {
    "model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "trust_remote_code": True,
    "stage": "sft", "do_train": True, "finetuning_type": "lora", "lora_rank": 8, "lora_target": "all",
    "dataset": "demo_alpaca", "dataset_dir": "data", "template": "llama3", "cutoff_len": 2048,
    "max_samples": 1000, "preprocessing_num_workers": 16,
    "output_dir": "saves/llama3-8b/lora/sft", "logging_steps": 10, "save_steps": 500, "plot_loss": True,
    "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8, "learning_rate": 1.0e-4,
    "num_train_epochs": 3.0, "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "bf16": True,
    "ddp_timeout": 180000000,
}


@pytest.fixture
def example(tmp_path):
    path = tmp_path / "llama3_lora_sft.yaml"
    path.write_text(yaml.safe_dump(EXAMPLE))
    return path


def test_example_with_bf16_validates_on_a_cpu_host_with_a_note(example, job_env):
    proc = rocmft("validate", str(example), env=job_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: " in proc.stdout and "bf16: depends on the GPU that runs the job" in proc.stdout
    assert "--arch NAME" in proc.stdout


def test_arch_without_bf16_turns_the_note_into_an_error(example, job_env):
    proc = rocmft("validate", str(example), "--arch", "gfx1030", env=job_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bf16: gfx1030 has no bf16 support (use fp16: true)" in proc.stdout


def test_arch_with_bf16_is_judged_for_it(example, job_env):
    proc = rocmft("validate", str(example), "--arch", "gfx942", env=job_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "judged for gfx942" in proc.stdout


def test_unknown_arch_is_one_error(example, job_env):
    proc = rocmft("validate", str(example), "--arch", "gfx9422", env=job_env)
    assert proc.returncode == 2
    assert "--arch: unknown arch `gfx9422`" in proc.stdout + proc.stderr
