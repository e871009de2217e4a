"""A user's DeepSpeed JSON against the shipped presets (as on disk, rendered): the preset when stage and
offload targets match and the JSON brings no optimizer/scheduler of its own, else kept as the recipe's file;
every other difference listed."""

from __future__ import annotations

import json

import pytest

from rocmft import importer, pipeline, plan
from rocmft.hardware import arches
from rocmft.importer import deepspeed
from rocmft.recipe import ds_presets, precision, recipes
from tests.unit.importer.conftest import SEEDS

BF16, FP32 = (precision.resolve(p, arches.get("gfx942"))[0] for p in ("bf16", "fp32"))


@pytest.mark.parametrize("name", ds_presets.shipped())
@pytest.mark.parametrize("prec", [BF16, FP32], ids=["bf16", "fp32"])
def test_every_shipped_preset_matches_itself_exactly(name, prec):
    match = deepspeed.match(deepspeed.rendered(name, prec), prec, {})
    assert (match.preset, match.kept, match.differences) == (name, None, [])


def test_the_posts_json_is_the_offload_preset_with_its_differences_listed():
    user = json.loads((SEEDS / "rocm-deepspeed-zero3" / "ds_z3_config.json").read_text())
    refused = {"zero_optimization.stage3_parition_grads": "unknown DeepSpeed key"}
    match = deepspeed.match(user, BF16, refused)
    assert match.preset == "zero3-offload" and match.kept is None
    lines = match.differences
    assert ("zero_optimization.stage3_parition_grads: (value not shown) -> (not set) in preset zero3-offload "
            "(unknown DeepSpeed key)") in lines
    assert 'gradient_clipping: 1.0 -> "auto" in preset zero3-offload' in lines
    assert not any(line.startswith("fp16.loss_scale") for line in lines)  # fp16 is off on both sides
    assert not any(line.startswith(("bf16.", "zero_optimization.stage:", "zero_optimization.offload")) for line in lines)


@pytest.mark.parametrize("user, why", [
    ({"zero_optimization": {"stage": 1}}, "no shipped preset has ZeRO stage 1 with optimizer offload none"),
    ({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}},
     "no shipped preset has ZeRO stage 3 with optimizer offload nvme"),
    ({"zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}},
     "its own optimizer block"),
])
def test_what_no_preset_matches_is_kept(user, why):
    match = deepspeed.match(user, BF16, {})
    assert match.preset == "" and match.differences[0].startswith(f"kept as the recipe's own file: {why}")
    assert match.kept["bf16"] == {"enabled": "auto"} and match.kept["fp16"] == {"enabled": "auto"}


def test_a_kept_file_loses_only_what_deepspeed_refuses():
    user = {"zero_optimization": {"stage": 1, "reduce_bucket_size": 5e8, "typo_key": 1}, "bf16": {"enabled": True},
            "steps_per_print": 10, "zero_optimisation": {}}
    kept = deepspeed.keep(user, {"zero_optimization.typo_key": "unknown", "zero_optimisation": "unknown"})
    assert kept == {"zero_optimization": {"stage": 1, "reduce_bucket_size": 5e8}, "bf16": {"enabled": "auto"},
                    "steps_per_print": 10, "fp16": {"enabled": "auto"}}
    assert user["zero_optimization"]["typo_key"] == 1  # the user's data is not touched


def test_a_kept_json_is_a_recipe_preset_rendered_validated_and_planned(project, tmp_path):
    (tmp_path / "train.yaml").write_text(
        "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\ndataset: demo_alpaca\n"
        "template: llama3\nfinetuning_type: lora\nbf16: true\nper_device_train_batch_size: 2\n")
    (tmp_path / "ds.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "zero_optimization": {"stage": 1, "reduce_bucket_size": 300000000, "stage3_parition_grads": True},
        "bf16": {"enabled": True}}))
    report = importer.run(importer.Request(str(tmp_path / "train.yaml"), "mine", ds=str(tmp_path / "ds.json"),
                                           arch="gfx942", gpus_per_node="8"))
    assert report.written == ["my/recipes/mine.yaml", "my/recipes/mine.ds.json"]
    recipe = recipes.load("mine")
    assert recipe.deepspeed == "mine.ds.json" and recipe.deepspeed_file == str(project / "my" / "recipes" / "mine.ds.json")
    kept = json.loads((project / "my" / "recipes" / "mine.ds.json").read_text())
    assert kept["zero_optimization"] == {"stage": 1, "reduce_bucket_size": 300000000}
    # rendered and validated like a shipped preset: DeepSpeed's own model and the HF fill against the YAML
    prep = pipeline.prepare("mine", validate=True)
    assert json.loads(prep.rendered.ds_config) == kept
    assert prep.rendered.args["deepspeed"].endswith("/ds_config.json")
    # the planner models it as the shipped shape it has, with its own bucket size
    result = plan.check(recipe)
    assert result.workload.deepspeed == "zero1" and result.workload.ds_reduce_bucket == 3e8


def test_a_recipe_naming_a_missing_json_is_refused(project):
    (project / "recipes" / "orphan.yaml").write_text(
        "base: _base/lora.yaml\narch: gfx942\ngpus_per_node: 8\ndeepspeed: orphan.ds.json\n"
        "llamafactory:\n  model_name_or_path: x/y\n  dataset: demo_alpaca\n  template: llama3\n")
    with pytest.raises(recipes.ProblemReport, match="`orphan.ds.json` not found next to the recipe or in recipes/"):
        recipes.load("orphan")


ZERO_PLUS_PLUS = {  # what the nearest preset would change: overlap_comm, ZeRO++ and activation partitioning
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "zero_optimization": {"stage": 3, "overlap_comm": False, "zero_quantized_weights": True,
                          "zero_hpz_partition_size": 8, "zero_quantized_gradients": True,
                          "stage3_gather_16bit_weights_on_model_save": True},
    "activation_checkpointing": {"partition_activations": True},
    "bf16": {"enabled": True}}
TRAIN = ("model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\ndataset: demo_alpaca\n"
         "template: llama3\nfinetuning_type: lora\nbf16: true\nper_device_train_batch_size: 2\nwarmup_ratio: 0.1\n")


@pytest.mark.parametrize("keep", [False, True], ids=["nearest-preset", "KEEP_DS=1"])
def test_keep_ds_keeps_the_json_byte_for_byte_and_deepspeed_still_validates_it(project, tmp_path, keep):
    (tmp_path / "train.yaml").write_text(TRAIN)
    source = json.dumps(ZERO_PLUS_PLUS, indent=4) + "\n\n"  # the user's own layout, blank line and all
    (tmp_path / "ds.json").write_text(source)
    report = importer.run(importer.Request(str(tmp_path / "train.yaml"), "mine", ds=str(tmp_path / "ds.json"),
                                           arch="gfx942", gpus_per_node="8", keep_ds=keep))
    recipe = recipes.load("mine")
    if not keep:  # what KEEP_DS=1 is for: the preset of its shape drops what the user chose
        assert recipe.deepspeed == "zero3" and not (project / "my" / "recipes" / "mine.ds.json").exists()
        assert any(line.startswith("zero_optimization.zero_quantized_weights: true -> (not set)")
                   for line in report.lines["deepspeed"])
        return
    assert report.written == ["my/recipes/mine.yaml", "my/recipes/mine.ds.json"]
    assert (project / "my" / "recipes" / "mine.ds.json").read_text() == source
    assert recipe.deepspeed == "mine.ds.json"
    assert report.lines["deepspeed"][0].startswith("kept byte for byte (KEEP_DS=1)")
    prep = pipeline.prepare("mine", validate=True)  # DeepSpeed's config model and the HF fill, as for a preset
    assert json.loads(prep.rendered.ds_config) == ZERO_PLUS_PLUS


def test_keep_ds_json_deepspeed_refuses_is_not_kept(project, tmp_path):
    (tmp_path / "train.yaml").write_text(TRAIN)
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2, "stage3_parition_grads": True}}))
    with pytest.raises(recipes.ProblemReport) as info:
        importer.run(importer.Request(str(tmp_path / "train.yaml"), "mine", ds=str(tmp_path / "ds.json"),
                                      arch="gfx942", gpus_per_node="8", keep_ds=True))
    assert "stage3_parition_grads: unknown DeepSpeed key" in str(info.value)
    assert not list((project / "my" / "recipes").glob("mine*"))


def test_warmup_ratio_becomes_the_warmup_steps_transformers_5_reads(project, tmp_path):
    """transformers 5.6: TrainingArguments.__post_init__ warns warmup_ratio is deprecated and copies it into
    warmup_steps, whose float below 1 is a ratio (get_warmup_steps). The recipe writes that, and validates quiet."""
    (tmp_path / "train.yaml").write_text(TRAIN)
    report = importer.run(importer.Request(str(tmp_path / "train.yaml"), "mine", arch="gfx942", gpus_per_node="8"))
    lf = recipes.load("mine").llamafactory
    assert lf["warmup_steps"] == 0.1 and "warmup_ratio" not in lf
    assert any(line.startswith("warmup_ratio: 0.1 -> warmup_steps: 0.1") for line in report.lines["translated"])
    problems = pipeline.validate_rendered(*(lambda p: (p.recipe, p.rendered, p.run_path))(
        pipeline.prepare("mine", validate=False)))
    assert not [p for p in problems if "warmup" in p.line()], [p.line() for p in problems]
