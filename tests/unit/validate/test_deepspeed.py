"""DeepSpeed's own config model judges the JSON, `auto` filled as the HF integration would."""

import json

from rocmft.recipe import recipes, render
from rocmft.validate import deepspeed as ds
from rocmft.validate import llamafactory as lf


def rendered(name="llama3-8b-z3", overrides=()):
    out = render.render(recipes.load(name, list(overrides)), "runs/x")
    return out, json.loads(out.ds_config)


def hf(out):
    return lf._hf_values(out.args)


def test_shipped_presets_pass():
    for preset in ("zero0", "zero2", "zero3", "zero3-offload"):
        out, cfg = rendered(overrides=[f"deepspeed={preset}"])
        assert ds.check(cfg, "ds.json", hf(out), 8) == [], preset


def test_the_posts_misspelling_and_a_misspelt_section_are_rejected():
    out, cfg = rendered()
    cfg["zero_optimization"]["stage3_parition_grads"] = True
    cfg["zero_optimisation"] = {"stage": 3}
    text = "\n".join(p.line() for p in ds.check(cfg, "ds.json", hf(out), 8))
    assert "zero_optimization.stage3_parition_grads: unknown DeepSpeed key" in text
    assert "zero_optimisation: DeepSpeed does not know this top-level key" in text
    assert "did you mean `zero_optimization`?" in text


def test_bad_values_each_reported():
    out, cfg = rendered()
    cfg["zero_optimization"]["stage"] = 5
    cfg["bf16"]["enabled"] = "yes please"
    problems = ds.check(cfg, "ds.json", hf(out), 8)
    keys = {p.key for p in problems}
    assert "zero_optimization.stage" in keys and "bf16.enabled" in keys


def test_precision_mismatch_with_the_yaml_is_caught_before_launch():
    out, cfg = rendered()
    cfg["bf16"]["enabled"] = False  # YAML says bf16: true
    text = "\n".join(p.line() for p in ds.check(cfg, "ds.json", hf(out), 8))
    assert "bf16.enabled" in text and "train YAML has bf16" in text


def test_batch_mismatch_uses_the_target_world_size():
    out, cfg = rendered()
    cfg["train_batch_size"] = 2  # 1 x 2 x 8 = 16 on the target
    assert any(p.key == "train_batch_size" for p in ds.check(cfg, "ds.json", hf(out), 8))
    cfg["train_batch_size"] = 16
    assert ds.check(cfg, "ds.json", hf(out), 8) == []


def test_a_json_judged_on_its_own():
    _, cfg = rendered()
    assert ds.check(cfg, "ds.json") == []
    assert ds.check([1, 2], "ds.json")[0].message.startswith("a DeepSpeed config must be")


def test_validation_leaves_the_environment_as_it_was():
    import os

    before = dict(os.environ)
    out, cfg = rendered()
    ds.check(cfg, "ds.json", hf(out), 8)
    assert dict(os.environ) == before


def test_a_json_with_only_train_batch_size_auto_passes():
    """LLaMA-Factory's example JSONs (and the ZeRO-3 post's) give the batch only as train_batch_size "auto":
    transformers fills it for the job's world size, and DeepSpeed derives the micro-batch from it."""
    out, cfg = rendered()
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        cfg.pop(key)
    assert ds.check(cfg, "ds.json", hf(out), 8) == []


def test_an_underscore_key_is_a_comment_and_a_config_objects_name_is_not_a_key():
    _, cfg = rendered()
    cfg["_comment"] = "supported model list: https://www.deepspeed.ai/tutorials/automatic-tensor-parallelism/"
    cfg["comms_config"] = {"verbose": False}  # LLaMA-Factory's ds_z3_fp8_config.json: DeepSpeed reads comms_logger
    problems = ds.check(cfg, "ds.json")
    assert [(p.key, p.severity) for p in problems] == [("comms_config", "error"), ("_comment", "note")]
    assert "DeepSpeed reads `comms_logger`" in problems[0].line()


def test_the_top_level_keys_known_without_deepspeed_are_the_ones_it_reads():
    """TOP_LEVEL_KEYS (what `make import` judges a JSON by on a host without DeepSpeed) is what this DeepSpeed's
    config model asks for at the top level, no more, no less."""
    ds_config = ds._import_deepspeed()
    seen: set[str] = set()
    ds_config.DeepSpeedConfig(ds._Watched({"train_micro_batch_size_per_gpu": 1}, seen))
    assert set(ds.TOP_LEVEL_KEYS) == seen
