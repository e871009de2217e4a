"""LLaMA-Factory's own parser judges the rendered YAML (no model load)."""


from rocmft.hardware import arches
from rocmft.recipe import recipes, render
from rocmft.validate import llamafactory as lf


def args_for(name="tiny-cpu", overrides=()):
    return render.render(recipes.load(name, list(overrides)), "runs/x").args


def lines(check):
    return [p.line() for p in check.problems]


def test_clean_config_passes():
    assert lf.check(args_for(), "t.yaml", arches.table()["cpu"]).problems == []


def test_every_mistake_reported_at_once_with_suggestions():
    args = args_for()
    args.update({"lerning_rate": 1.0, "flash_attn": False, "finetuning_type": "lorra", "infer_backend": "pt",
                 "gpu_ids": "0", "per_device_train_batch_size": 2.5, "template": "llama5", "torch_dtype": "float16",
                 "fsdp_transformer_layer_cls_to_wrap": "LlamaDecoderLayer"})
    check = lf.check(args, "t.yaml", arches.table()["cpu"])
    text = "\n".join(lines(check))
    assert "lerning_rate: unknown to LLaMA-Factory (did you mean `learning_rate`?)" in text
    assert "flash_attn: YAML read this value as false" in text
    assert "finetuning_type: `lorra` is not a valid choice (did you mean `lora`?)" in text
    assert "infer_backend: `pt` is not a valid choice" in text and "huggingface" in text
    assert "gpu_ids: unknown to LLaMA-Factory (not a LLaMA-Factory argument: choose GPUs with GPUS=" in text
    assert "per_device_train_batch_size: must be an integer, got 2.5" in text
    assert "template: LLaMA-Factory has no template `llama5`" in text
    assert "torch_dtype" in text
    assert "fsdp_transformer_layer_cls_to_wrap: unknown to LLaMA-Factory (transformers 5 reads it inside fsdp_config" in text
    assert all(line.startswith("error: t.yaml: ") for line in lines(check))


def test_cross_field_check_from_llamafactory_itself():
    args = args_for(overrides=["quantization_bit=4", "finetuning_type=full"])
    text = "\n".join(lines(lf.check(args, "t.yaml", arches.table()["cpu"])))
    assert "Quantization is only compatible with the LoRA or OFT method" in text


def test_gpu_recipe_bf16_is_judged_for_the_target_not_this_host():
    check = lf.check(args_for("llama3-8b-lora"), "t.yaml", arches.table()["gfx942"])
    assert check.problems == []
    assert any(n.key == "bf16" and "gfx942" in n.message for n in check.notes)


def test_host_dependent_bf16_does_not_mask_a_typo():
    args = args_for("llama3-8b-lora")
    args["lora_rnak"] = 8
    check = lf.check(args, "t.yaml", arches.table()["gfx942"])
    assert [p.key for p in check.problems] == ["lora_rnak"]


def test_str_or_bool_fields_take_a_string():
    args = args_for()
    args["include_num_input_tokens_seen"] = "non_padding"
    assert lf.check(args, "t.yaml", arches.table()["cpu"]).problems == []


def test_validation_leaves_the_environment_as_it_was():
    # The launcher's environment becomes the job's: a verbosity left behind silenced the job's logs.
    import os

    before = dict(os.environ)
    lf.check(args_for(), "t.yaml", arches.table()["cpu"])
    assert dict(os.environ) == before


def test_every_missing_optional_package_is_one_line_naming_it_and_how_to_add_it():
    # None of these is in the CPU stack. LLaMA-Factory alone stops at the first and says it garbled
    # ("No package metadata was found for The 'badam>=1.2.1' distribution was not found ...").
    # No arch: this venv is the stack that judges (with an arch, its image's list does: test_image_packages.py).
    args = args_for(overrides=["finetuning_type=full", "use_badam=true", "use_swanlab=true"])
    text = lines(lf.check(args, "t.yaml"))
    assert text == [
        ("error: t.yaml: use_badam: needs the package `badam>=1.2.1`; this venv does not have it "
         "(add `badam>=1.2.1` to requirements/train.txt, then `make setup`)"),
        ("error: t.yaml: use_swanlab: needs the package `swanlab`; this venv does not have it "
         "(add `swanlab` to requirements/train.txt, then `make setup`)"),
    ]


def test_a_transformers_warning_about_a_key_is_a_note_on_it():
    args = args_for()
    args.pop("warmup_steps", None)
    args["warmup_ratio"] = 0.1
    check = lf.check(args, "t.yaml", arches.table()["cpu"])
    assert check.problems == []
    assert [n.line() for n in check.notes] == [
        ("note: t.yaml: warmup_ratio: transformers: warmup_ratio is deprecated and will be removed in v5.2. "
         "Use `warmup_steps` instead.")]


def test_template_names_read_from_source_are_llamafactorys_registry():
    from llamafactory.data.template import TEMPLATES

    assert sorted(lf._templates()) == sorted(TEMPLATES)
