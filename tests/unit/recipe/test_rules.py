"""Combinations a source says break on the GPU (rocmft.recipe.rules), checked at render: each rule refuses or renders
a valid value, says so with its source, and leaves every other recipe alone. Built from the shipped recipes."""

from __future__ import annotations

import pytest
import yaml

from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes, render, rules

SHIPPED = recipes.shipped()


def rendered(name: str, *overrides: str) -> render.Rendered:
    return render.render(recipes.load(name, list(overrides)), "runs/x")


def notes_on(out: render.Rendered, key: str) -> list[str]:
    return [p.line() for p in out.warnings if p.key == f"llamafactory.{key}" and p.severity == "note"]


@pytest.mark.parametrize("name", SHIPPED)
def test_no_shipped_recipe_renders_neat_packing_fa2_with_a_batch_over_1(name):
    """LLaMA-Factory's SFTDataCollatorWith4DAttentionMask asserts batch 1 under neat packing + flash-attn 2, for the
    eval micro-batch too (on main, _base/sft.yaml's eval batch 4 reached every gfx942 SFT recipe)."""
    args = rendered(name).args
    if args.get("neat_packing") and args.get("flash_attn") == "fa2":
        assert args.get("per_device_train_batch_size", rules.HF_TRAIN_BATCH) == 1
        assert args.get("per_device_eval_batch_size", rules.HF_EVAL_BATCH) == 1


@pytest.mark.parametrize("name", SHIPPED)
def test_no_shipped_recipe_renders_liger_with_zero3_and_a_trainable_lm_head(name):
    out = rendered(name)
    assert not (out.args.get("enable_liger_kernel") and rules.zero_stage(out.ds_config) == 3
                and rules.lm_head_trainable(out.args)), "linkedin/Liger-Kernel#1048"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipes_trip_no_rule(name):
    """The shipped recipes state what the rules would render, so none of them needs a note."""
    out = rendered(name)
    assert not [p for p in out.warnings if p.key in ("llamafactory.per_device_eval_batch_size",
                                                      "llamafactory.enable_liger_kernel")]
    assert "# rule (rocmft.recipe.rules)" not in out.train_yaml


def test_eval_batch_over_1_under_neat_packing_fa2_renders_1_with_a_note_and_a_comment():
    out = rendered("llama3-8b-z3", "per_device_eval_batch_size=4")
    assert out.args["per_device_eval_batch_size"] == 1
    assert yaml.safe_load(out.train_yaml)["per_device_eval_batch_size"] == 1
    [note] = notes_on(out, "per_device_eval_batch_size")
    assert "rendered 1, not 4" in note and "collator.py" in note and "Cost:" in note
    assert "# rule (rocmft.recipe.rules): llamafactory.per_device_eval_batch_size: rendered 1, not 4" in out.train_yaml


def test_an_unset_eval_batch_is_hf_default_8_and_renders_1():
    out = rendered("llama3-8b-lora", "per_device_eval_batch_size=null")
    assert out.args["per_device_eval_batch_size"] == 1
    assert "rendered 1, not 8" in notes_on(out, "per_device_eval_batch_size")[0]


def test_no_eval_no_change():
    out = rendered("llama3-8b-z3", "per_device_eval_batch_size=4", "val_size=null")
    assert out.args["per_device_eval_batch_size"] == 4 and not out.warnings


def test_train_batch_over_1_under_neat_packing_fa2_is_refused_with_the_reason():
    with pytest.raises(ProblemReport) as info:
        rendered("llama3-8b-z3", "per_device_train_batch_size=2")
    [problem] = info.value.errors
    assert problem.key == "llamafactory.per_device_train_batch_size"
    assert "bsz should be 1 for neat packing" in problem.message and "collator.py" in problem.message
    assert "per_device_train_batch_size: 1" in problem.suggestion


@pytest.mark.parametrize("overrides", [("flash_attn=sdpa",), ("neat_packing=false",), ("flash_attn=auto",)])
def test_sdpa_or_no_neat_packing_takes_any_batch(overrides):
    out = rendered("llama3-8b-z3", "per_device_eval_batch_size=4", "per_device_train_batch_size=2", *overrides)
    assert out.args["per_device_eval_batch_size"] == 4 and out.args["per_device_train_batch_size"] == 2


def test_the_7900xtx_recipe_runs_sdpa_so_its_batches_are_free():
    out = rendered("qwen2.5-7b-lora-7900xtx", "per_device_eval_batch_size=4")
    assert out.args["flash_attn"] == "sdpa" and out.args["per_device_eval_batch_size"] == 4


def test_liger_on_a_zero3_full_fine_tune_is_switched_off_with_its_source():
    out = rendered("llama3-8b-full-z3", "enable_liger_kernel=true", "deepspeed=zero3")
    assert out.args["enable_liger_kernel"] is False
    assert yaml.safe_load(out.train_yaml)["enable_liger_kernel"] is False
    [note] = notes_on(out, "enable_liger_kernel")
    assert "switched off" in note and "linkedin/Liger-Kernel#1048" in note and "huggingface/trl#5891" in note
    assert "Cost:" in note
    assert "# rule (rocmft.recipe.rules): llamafactory.enable_liger_kernel: switched off" in out.train_yaml


def test_liger_on_the_qwen_offload_full_fine_tune_is_switched_off():
    out = rendered("qwen2.5-7b-z3-offload", "enable_liger_kernel=true")
    assert out.args["enable_liger_kernel"] is False and notes_on(out, "enable_liger_kernel")


@pytest.mark.parametrize("name, overrides", [
    ("llama3-8b-full-z3", ("enable_liger_kernel=true", "deepspeed=zero2")),  # lm_head whole on every rank
    ("llama3-8b-z3", ()),                                                     # LoRA: lm_head frozen
    ("llama3-8b-dpo-z3", ("enable_liger_kernel=true", "finetuning_type=full")),  # DPO: no fused CE in LLaMA-Factory
])
def test_liger_is_kept_where_the_lm_head_is_not_a_sharded_trainable_parameter(name, overrides):
    out = rendered(name, *overrides)
    assert out.args["enable_liger_kernel"] is True and not notes_on(out, "enable_liger_kernel")


def test_liger_with_lora_training_lm_head_as_an_additional_target_is_switched_off():
    out = rendered("llama3-8b-z3", "additional_target=lm_head")
    assert out.args["enable_liger_kernel"] is False and notes_on(out, "enable_liger_kernel")


def test_liger_on_the_shipped_pretraining_recipe_is_switched_off():
    """`make train RECIPE=llama3-8b-pt-z3 SET=enable_liger_kernel=true`: stage pt, a full fine-tune under ZeRO-3,
    would render the crash the rule cites (LLaMA-Factory fuses the loss for pt as for sft)."""
    out = rendered("llama3-8b-pt-z3", "enable_liger_kernel=true")
    assert out.args["stage"] == "pt" and out.args["enable_liger_kernel"] is False
    [note] = notes_on(out, "enable_liger_kernel")
    assert "switched off" in note and "linkedin/Liger-Kernel#1048" in note


@pytest.mark.parametrize("extra, switched_off", [
    ("embed_tokens,lm_head", True),  # LLaMA-Factory's comma-separated list: lm_head trained, sharded by ZeRO-3
    ("lm_head", True),
    ("embed_tokens", False),         # lm_head frozen: Liger's fused loss never writes its gradient
    (None, False),
])
def test_a_freeze_fine_tune_trains_lm_head_only_when_it_names_it(extra, switched_off):
    overrides = ["deepspeed=zero3", "finetuning_type=freeze", "enable_liger_kernel=true"]  # the recipe is on ZeRO-2 now
    overrides += [f"freeze_extra_modules={extra}"] if extra else []
    out = rendered("llama3-8b-full-z3", *overrides)
    assert out.args["finetuning_type"] == "freeze" and rules.zero_stage(out.ds_config) == 3
    assert out.args["enable_liger_kernel"] is (not switched_off)
    assert bool(notes_on(out, "enable_liger_kernel")) is switched_off


def test_each_rule_names_its_source():
    for rule in rules.RULES:
        assert rule.source and ("LLaMA-Factory" in rule.source or "#" in rule.source)


def test_the_planner_never_suggests_liger_where_the_rule_switches_it_off():
    """qwen2.5-7b-z3-offload (full fine-tune, ZeRO-3): on main `make plan` suggested enable_liger_kernel=true."""
    from rocmft import plan as planner

    result = planner.check(recipes.load("qwen2.5-7b-z3-offload"))
    assert "enable_liger_kernel=true" not in result.summary
