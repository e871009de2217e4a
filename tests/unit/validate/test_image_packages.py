"""A setting that needs a package the arch's image lacks is refused, judged from docker/arches.yaml
(`Arch.image_packages`), never from this host's venv (issue 31: `rocmft validate` said `ok` for Liger on an
image that had none)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.recipe import recipes, render
from rocmft.validate import image_packages
from rocmft.validate import llamafactory as lf


def args_for(name="tiny-cpu", overrides=()):
    return render.render(recipes.load(name, list(overrides)), "runs/x").args


def without(arch_name: str, *packages: str) -> arches.Arch:
    arch = arches.table()[arch_name]
    kept = {k: v for k, v in arch.image_packages.items() if k not in packages}
    return replace(arch, image_packages=MappingProxyType(kept))


@pytest.mark.parametrize("key, value, package", [
    ("enable_liger_kernel", True, "liger-kernel"),
    ("flash_attn", "fa2", "flash-attn"),
    ("quantization_bit", 4, "bitsandbytes"),
    ("use_galore", True, "galore-torch"),
    ("use_apollo", True, "apollo-torch"),
    ("use_badam", True, "badam"),
    ("use_adam_mini", True, "adam-mini"),
    ("mixture_of_depths", "convert", "mixture-of-depth"),
    ("plot_loss", True, "matplotlib"),
])
def test_a_setting_whose_package_the_image_lacks_is_one_error(key, value, package):
    arch = without("gfx942", package)
    args = {"finetuning_type": "lora", key: value}
    errors, _, _ = image_packages.judge(args, arch, "t.yaml")
    assert [(p.key, p.severity) for p in errors] == [(key, "error")]
    assert f"needs `{package}`, which the gfx942 image does not have" in errors[0].message
    assert "llamafactory/" in errors[0].message  # the LLaMA-Factory code that needs it


def test_the_image_list_decides_not_this_host():
    # liger-kernel is in the gfx942 image (the table) and not in this CPU venv: judged ok, with a note
    check = lf.check(args_for("llama3-8b-lora", ["enable_liger_kernel=true"]), "t.yaml", arches.table()["gfx942"])
    assert check.problems == []
    assert any(n.key == "enable_liger_kernel" and "its image has liger-kernel 0.8.2" in n.message for n in check.notes)
    # the same recipe for an arch whose image lacks it: an error, not a note
    check = lf.check(args_for("llama3-8b-lora", ["enable_liger_kernel=true"]), "t.yaml", without("gfx942", "liger-kernel"))
    assert [p.key for p in check.problems] == ["enable_liger_kernel"]


def test_cpu_has_no_liger_no_flash_attn_but_bitsandbytes():
    # micro-batch 1: neat packing with flash-attn 2 refuses more at render (rocmft.recipe.rules), before validation
    args = args_for(overrides=["enable_liger_kernel=true", "flash_attn=fa2", "quantization_bit=4",
                               "per_device_train_batch_size=1"])
    check = lf.check(args, "t.yaml", arches.table()["cpu"])
    keys = [p.key for p in check.problems if "image does not have" in p.message]
    assert keys == ["enable_liger_kernel", "flash_attn"]  # bitsandbytes' CPU backend: tiny-cpu-qlora trains in CI
    gone = lf.check(args, "t.yaml", without("cpu", "bitsandbytes"))
    assert "quantization_bit" in [p.key for p in gone.problems if "image does not have" in p.message]


def test_fa2_on_gfx1030_is_refused():
    # gfx1030 has no flash-attn backend (docker/arches.yaml flash_attn: none, no flash-attn package)
    errors, _, _ = image_packages.judge({"flash_attn": "fa2"}, arches.table()["gfx1030"], "t.yaml")
    assert [p.key for p in errors] == ["flash_attn"]
    assert image_packages.judge({"flash_attn": "sdpa"}, arches.table()["gfx1030"], "t.yaml")[0] == []


def test_validate_cli_exits_2_for_liger_on_cpu(tmp_path, capsys):
    recipe = tmp_path / "liger.yaml"
    recipe.write_text("base: tiny-cpu.yaml\nllamafactory:\n  enable_liger_kernel: true\n")
    code = main(["validate", str(recipe)])
    captured = capsys.readouterr()
    err = captured.err + captured.out
    assert code == 2, err
    assert "enable_liger_kernel: needs `liger-kernel`, which the cpu image does not have" in err
