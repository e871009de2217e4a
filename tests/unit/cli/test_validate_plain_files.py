"""`rocmft validate FILE --arch NAME` on a plain LLaMA-Factory YAML (not a recipe), by LLaMA-Factory's own parser.

Host-dependent checks (bf16 needs a GPU with bf16) are judged for --arch when given; without it they are a
note, so LLaMA-Factory's own example shape validates on a CPU-only laptop or CI machine."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.conftest import PYTHON, ROOT, rocmft

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


# ---- from inside a LLaMA-Factory checkout: relative paths are the current directory's, as llamafactory-cli reads them

ZERO3 = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
         "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
         "zero_optimization": {"stage": 3, "overlap_comm": False, "stage3_gather_16bit_weights_on_model_save": True}}


EXTRAS = {
    "extras/galore/llama3_full_sft.yaml": {"finetuning_type": "full", "use_galore": True, "galore_layerwise": True,
                                           "galore_target": "mlp,self_attn", "galore_rank": 128, "galore_scale": 2.0,
                                           "pure_bf16": True, "gradient_accumulation_steps": 1},
    "extras/apollo/llama3_full_sft.yaml": {"finetuning_type": "full", "use_apollo": True, "apollo_layerwise": True,
                                           "apollo_target": "all", "apollo_rank": 128, "apollo_scale": 32.0,
                                           "apollo_scale_type": "channel", "pure_bf16": True,
                                           "gradient_accumulation_steps": 1},
    # the same two with the optimizer LLaMA-Factory builds them from (optim unset: transformers 5.6's fused AdamW)
    "extras/galore/llama3_full_sft_adamw.yaml": {"finetuning_type": "full", "use_galore": True, "galore_layerwise": True,
                                                 "galore_target": "mlp,self_attn", "galore_rank": 128,
                                                 "galore_scale": 2.0, "pure_bf16": True,
                                                 "gradient_accumulation_steps": 1, "optim": "adamw_torch"},
    "extras/apollo/llama3_full_sft_adamw.yaml": {"finetuning_type": "full", "use_apollo": True, "apollo_layerwise": True,
                                                 "apollo_target": "all", "apollo_rank": 128, "apollo_scale": 32.0,
                                                 "apollo_scale_type": "channel", "pure_bf16": True,
                                                 "gradient_accumulation_steps": 1, "optim": "adamw_torch"},
    "extras/badam/llama3_full_sft.yaml": {"finetuning_type": "full", "use_badam": True, "badam_mode": "layer",
                                          "badam_switch_mode": "ascending", "badam_switch_interval": 50},
    "extras/adam_mini/qwen2_full_sft.yaml": {"finetuning_type": "full", "use_adam_mini": True},
    "extras/mod/llama3_full_sft.yaml": {"finetuning_type": "full", "mixture_of_depths": "convert",
                                        "optim": "paged_adamw_8bit", "pure_bf16": True},
}


@pytest.fixture
def lf_checkout(tmp_path):
    """A folder shaped like LLaMA-Factory's checkout (data/ with its registry, examples/, a local model): nothing
    in it is known to this project, whose own data/ registers other datasets."""
    root = tmp_path / "LLaMA-Factory"
    (root / "data").mkdir(parents=True)
    for name in ("identity", "alpaca_en_demo"):
        (root / "data" / f"{name}.json").write_text("[]")
    (root / "data" / "dataset_info.json").write_text(json.dumps(
        {name: {"file_name": f"{name}.json"} for name in ("identity", "alpaca_en_demo")}))
    (root / "models" / "qwen3-tiny").mkdir(parents=True)
    (root / "models" / "qwen3-tiny" / "config.json").write_text("{}")
    ds = root / "examples" / "deepspeed"
    ds.mkdir(parents=True)
    (ds / "ds_z3_config.json").write_text(json.dumps(ZERO3))
    # examples/deepspeed/ds_z2_autotp_config.json starts like this: JSON has no comments, so a key is one
    (ds / "ds_z2_autotp_config.json").write_text(json.dumps(
        {"_comment": "supported model list: https://www.deepspeed.ai/tutorials/automatic-tensor-parallelism/", **ZERO3}))
    shapes = {
        "train_lora/qwen3_lora_sft_ds3.yaml": {"deepspeed": "examples/deepspeed/ds_z3_config.json"},
        # examples/train_lora/qwen3_lora_sft_ray.yaml: dataset_info.json read from the Hub
        "train_lora/qwen3_lora_sft_ray.yaml": {"dataset_dir": "REMOTE:llamafactory/demo_data", "dataset": "alpaca_en_demo"},
        # LLaMA-Factory's examples/extras/{galore,apollo,badam,adam_mini,mod}: the keys each sets (read from
        # hiyouga/LLaMA-Factory), an optional package each needs
        **EXTRAS,
    }
    for rel, extra in shapes.items():
        path = root / "examples" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({**EXAMPLE, "model_name_or_path": "models/qwen3-tiny", "template": "qwen3",
                                        "dataset": "identity,alpaca_en_demo", "dataset_dir": "data", **extra}))
    return root


def validate_in(cwd, *args, env):
    return subprocess.run([PYTHON, "-m", "rocmft.cli.main", "validate", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_llamafactory_examples_from_inside_their_checkout(lf_checkout, job_env):
    proc = validate_in(lf_checkout, "examples/train_lora/qwen3_lora_sft_ds3.yaml",
                       "examples/train_lora/qwen3_lora_sft_ray.yaml", "examples/deepspeed/ds_z2_autotp_config.json",
                       *(f"examples/{name}" for name in EXTRAS), "--arch", "gfx942", env=job_env)
    out = proc.stdout
    assert proc.returncode == 2, out + proc.stderr  # mixture-of-depth is in no image
    verdicts = dict(reversed(line.split(None, 1)) for line in out.splitlines() if line.startswith(("ok", "FAIL")))
    assert verdicts["examples/train_lora/qwen3_lora_sft_ds3.yaml"] == "ok"
    assert verdicts["examples/train_lora/qwen3_lora_sft_ray.yaml"] == "ok"
    assert verdicts["examples/deepspeed/ds_z2_autotp_config.json"] == "ok"
    # the optimizers the gfx942 image carries (docker/arches.yaml packages): judged from that list, not this venv
    for path, package in (("galore/llama3_full_sft_adamw", "galore-torch"), ("apollo/llama3_full_sft_adamw", "apollo-torch"),
                          ("badam/llama3_full_sft", "badam"), ("adam_mini/qwen2_full_sft", "adam-mini")):
        path = f"examples/extras/{path}.yaml"
        assert verdicts[path] == "ok", out
        assert f"note: {path}: " in out and f"its image has {package} " in out
    # as shipped, GaLore and APOLLO would stop at their first step: transformers 5.6's default optimizer
    for name, takes in (("galore", "adamw_torch, adamw_bnb_8bit"), ("apollo", "adamw_torch;")):
        path = f"examples/extras/{name}/llama3_full_sft.yaml"
        assert f"FAIL  {path}" in out, out
        line = next(x for x in out.splitlines() if x.startswith(f"error: {path}: optim: "))
        assert takes.rstrip(";") in line and "an unset optim (transformers' default, adamw_torch_fused)" in line \
            and "(optim: adamw_torch)" in line, line
    assert "note: examples/train_lora/qwen3_lora_sft_ray.yaml: dataset_dir: dataset_info.json comes from the Hub " \
           "dataset repo `llamafactory/demo_data`" in out
    assert "note: examples/deepspeed/ds_z2_autotp_config.json: _comment: a comment (DeepSpeed ignores it)" in out
    # the one no image can carry: one line naming the key, the package, and why
    mod = [line for line in out.splitlines() if line.startswith("error: examples/extras/mod/")]
    assert mod == [("error: examples/extras/mod/llama3_full_sft.yaml: mixture_of_depths: needs `mixture-of-depth`, "
                    "which the gfx942 image does not have (docker/arches.yaml arches.gfx942 packages; "
                    "llamafactory/hparams/parser.py _check_extra_dependencies: check_version('mixture-of-depth>=1.1.6', "
                    "mandatory=True)) (no mixture-of-depth release imports with the images' transformers 5.6 (1.2.0 "
                    "imports TRANSFORMERS_CACHE, 1.1.6 is_torch_fx_available: both removed in transformers 5): remove "
                    "`mixture_of_depths`)")], out
    assert "No package metadata" not in out + proc.stderr
    assert "[transformers]" not in out + proc.stderr  # warmup_ratio's deprecation is a note on its key instead
    assert "note: examples/train_lora/qwen3_lora_sft_ds3.yaml: warmup_ratio: transformers: warmup_ratio is deprecated" in out


def test_the_same_file_from_elsewhere_reads_that_folder(lf_checkout, job_env):
    """What llamafactory-cli would do from the project root: the example's relative paths point at nothing."""
    proc = validate_in(ROOT, str(lf_checkout / "examples/train_lora/qwen3_lora_sft_ds3.yaml"), env=job_env)
    assert proc.returncode == 2
    assert "model_name_or_path: no model at `models/qwen3-tiny`" in proc.stdout
    assert "dataset: dataset `identity` is not registered" in proc.stdout
    assert "deepspeed: `examples/deepspeed/ds_z3_config.json` does not exist" in proc.stdout
