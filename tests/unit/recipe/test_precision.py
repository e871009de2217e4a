import pytest

from rocmft.hardware import arches
from rocmft.recipe import precision

TABLE = arches.table()


@pytest.mark.parametrize("name", list(TABLE))
def test_auto_is_bf16_where_supported_else_fp32_never_fp16(name):
    arch = TABLE[name]
    prec, problems = precision.resolve("auto", arch)
    assert not problems
    assert prec.name == ("bf16" if arch.bf16 else "fp32")


def test_bf16_support_matches_the_brief():
    for name in ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1201"):
        assert TABLE[name].bf16, name
    assert not TABLE["gfx1030"].bf16 and not TABLE["cpu"].bf16


@pytest.mark.parametrize("name", [n for n in TABLE if TABLE[n].is_gpu])
def test_fp16_on_any_amd_arch_warns_about_overflow(name):
    prec, problems = precision.resolve("fp16", TABLE[name])
    assert prec.fp16
    assert [p.severity for p in problems] == ["warning"]
    assert "overflow" in problems[0].message


def test_bf16_on_arch_without_it_is_an_error():
    _, problems = precision.resolve("bf16", TABLE["gfx1030"])
    assert problems[0].severity == "error" and "not supported on gfx1030" in problems[0].message
