"""QLoRA's rules: bitsandbytes' pin (CPU venv = images), the CDNA warp-64 refusal read from the arch table, and
LLaMA-Factory's quantization rules in its own words (checked against its installed source), as validation
reports them; the export of a QLoRA run merges into the unquantised base."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest

from rocmft.cli import export
from rocmft.hardware import arches, versions
from rocmft.recipe import quantization, recipes, render
from rocmft.validate import quantization as rule

ROOT = Path(__file__).resolve().parents[3]
TABLE = arches.table()
ZERO3 = json.dumps({"zero_optimization": {"stage": 3}})


def test_the_cpu_venv_pins_the_images_bitsandbytes():
    no_deps = versions.read_pins(ROOT / "requirements" / "no-deps.txt")
    assert no_deps["bitsandbytes"] == versions.BITSANDBYTES_VERSION == TABLE["gfx942"].image_packages["bitsandbytes"]
    assert "bitsandbytes" not in versions.read_pins(versions.lock_file())  # the ROCm wheelhouses download every lock pin


@pytest.mark.parametrize("family,version,old", [
    ("cdna3", "0.49.1", True), ("cdna2", "0.48.2", True), ("cdna4", "0.49.2", False), ("cdna3", "0.50.2", False),
    ("rdna3", "0.49.1", False),  # 32-wide waves: blocksize 64 always worked there
    ("cdna3", None, False),      # no bitsandbytes at all: the image-package rule's to report, not this one
])
def test_cdna_bitsandbytes_before_the_warp64_fix(family, version, old):
    assert quantization.cdna_bitsandbytes_too_old(family, version) is old


def with_bnb(name: str, version: str):
    arch = TABLE[name]
    return replace(arch, image_packages={**arch.image_packages, "bitsandbytes": version})


def test_an_old_bitsandbytes_on_cdna_is_one_line_naming_the_fix():
    args = {"quantization_bit": 4, "finetuning_type": "lora"}
    [problem] = rule.check(args, None, with_bnb("gfx942", "0.49.1"), "t.yaml")
    line = problem.line()
    assert line.startswith("error: t.yaml: quantization_bit: the gfx942 image's bitsandbytes 0.49.1 predates")
    assert "bitsandbytes#1856" in line and "0.49.2" in line and "make image ARCH=gfx942" in line
    assert rule.check(args, None, with_bnb("gfx1100", "0.49.1"), "t.yaml") == []  # RDNA: warp 32
    for name in ("gfx942", "gfx950", "gfx90a"):  # the shipped images (0.50.2) pass
        assert rule.check(args, None, TABLE[name], "t.yaml") == []
    assert rule.check({"finetuning_type": "lora"}, None, with_bnb("gfx942", "0.49.1"), "t.yaml") == []


def test_8bit_under_zero3_is_refused_in_llamafactorys_words():
    [problem] = rule.check({"quantization_bit": 8}, ZERO3, TABLE["gfx942"], "t.yaml")
    assert problem.key == "quantization_bit"
    assert f'"{quantization.LF_ZERO3_4BIT}"' in problem.message
    assert rule.check({"quantization_bit": 4}, ZERO3, TABLE["gfx942"], "t.yaml") == []  # QLoRA shards under ZeRO-3
    assert rule.check({"quantization_bit": 8}, None, TABLE["gfx942"], "t.yaml") == []
    [hqq] = rule.check({"quantization_bit": 4, "quantization_method": "hqq"}, ZERO3, TABLE["gfx942"], "t.yaml")
    assert "HQQ quantization is incompatible with DeepSpeed ZeRO-3 or FSDP." in hqq.message


def test_rules_llamafactorys_parser_checks_itself_are_not_reported_twice():
    refusals = quantization.lf_refusals({"quantization_bit": 4, "finetuning_type": "full", "resize_vocab": True}, False)
    assert {(r.key, r.at_load) for r in refusals} == {("finetuning_type", False), ("resize_vocab", False)}
    assert rule.check({"quantization_bit": 4, "finetuning_type": "full"}, None, TABLE["gfx942"], "t.yaml") == []


def _lf_source(*parts: str) -> str:
    spec = importlib.util.find_spec("llamafactory")
    if spec is None:
        pytest.skip(reason="LLaMA-Factory is not installed in this venv (make setup)")
    return Path(spec.origin).parent.joinpath(*parts).read_text()


def test_the_messages_are_llamafactorys_own():
    parser = _lf_source("hparams", "parser.py")
    loader = _lf_source("model", "model_utils", "quantization.py")
    for message in (quantization.LF_ONLY_LORA, quantization.LF_FP8, quantization.LF_DEVICE_MAP,
                    quantization.LF_PISSA, quantization.LF_RESIZE):
        assert message in parser, message
    for message in (quantization.LF_ZERO3_4BIT, quantization.LF_BNB_BITS,
                    quantization.LF_ZERO3_OTHER.format(method="HQQ"), quantization.LF_ZERO3_OTHER.format(method="EETQ")):
        assert message in loader, message
    assert "Cannot merge adapters to a quantized model." in _lf_source("train", "tuner.py")


def test_the_qlora_recipes_render_nf4_with_double_quantisation():
    for name in [n for n in recipes.shipped() if "qlora" in n]:
        args = render.render(recipes.load(name), "runs/x").args
        assert (args["quantization_bit"], args["quantization_type"], args["double_quantization"]) == (4, "nf4", True), name


def test_export_of_a_qlora_run_merges_into_the_unquantised_base():
    train = {"model_name_or_path": "models/tiny-llama", "template": "llama3", "quantization_bit": 4,
             "quantization_method": "bnb", "quantization_type": "nf4", "double_quantization": True}
    config = export.export_config(train, "runs/q")
    assert not {k for k in config if k.startswith("quantization")}
    assert config["model_name_or_path"] == "models/tiny-llama" and config["adapter_name_or_path"] == "runs/q/output"


def test_validation_of_a_rendered_zero3_recipe_reports_8bit_once_in_llamafactorys_words():
    """The whole stack check (LLaMA-Factory's parser + DeepSpeed's config model + these rules) on a real render:
    LLaMA-Factory's parser accepts 8 bits under ZeRO-3 and would fail at model load; rocmft says so up front."""
    from rocmft import validate

    if importlib.util.find_spec("llamafactory") is None:
        pytest.skip(reason="LLaMA-Factory is not installed in this venv (make setup)")
    out = render.render(recipes.load("llama3-8b-z3", ["quantization_bit=8"]), "runs/x")
    found = validate.check_stack(out.args, out.ds_config, "gfx942", 8, "train.yaml", "ds.json")
    errors = [p.line() for p in found if p.severity == "error"]
    assert errors == [f'error: train.yaml: quantization_bit: LLaMA-Factory refuses it when the model loads: '
                      f'"{quantization.LF_ZERO3_4BIT}" (quantization_bit=4 (bitsandbytes NF4 shards under ZeRO-3), '
                      'or deepspeed=none)'], errors
    four = render.render(recipes.load("llama3-8b-z3", ["quantization_bit=4"]), "runs/x")
    assert not [p for p in validate.check_stack(four.args, four.ds_config, "gfx942", 8, "train.yaml", "ds.json")
                if p.severity == "error"]
