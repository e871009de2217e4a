"""What rocmft owns, translated from the user's files and said: precision, run directory, resume, GPUs,
nodes, arch, environment. Pure functions over dicts and the arch table."""

from __future__ import annotations

import pytest

from rocmft.hardware import arches
from rocmft.importer import command, translate
from rocmft.importer.report import Report
from rocmft.importer.source import Source
from rocmft.io.problems import ProblemReport


def arch(name):
    return arches.get(name)


@pytest.mark.parametrize("args, name, wanted, said", [
    ({"bf16": True}, "gfx942", "auto", "bf16: true -> precision: auto (auto: gfx942 has bf16)"),
    ({"bf16": False, "fp16": False}, "gfx942", "fp32", "bf16: false, fp16: false -> precision: fp32"),
    ({}, "cpu", "auto", "no bf16/fp16 -> precision: auto (auto: cpu has no fast bf16"),
    ({"fp16": True}, "gfx1100", "fp16", "fp16: true -> precision: fp16"),
    ({"bf16": True}, "gfx1030", "auto", "bf16: true -> precision: auto (fp32: bf16 is not possible on gfx1030"),
    ({"fp16": True}, "cpu", "auto", "fp16: true -> precision: auto (fp32: fp16 is not possible on cpu"),
    ({"pure_bf16": True}, "gfx90a", "auto", "pure_bf16: true -> precision: auto"),
])
def test_precision_for_the_arch(args, name, wanted, said):
    report = Report()
    assert translate.choose_precision(args, arch(name), report) == wanted
    assert report.lines["translated"][0].startswith(said), report.lines


def test_torch_dtype_is_dropped_and_says_what_decides():
    report = Report()
    translate.choose_precision({"torch_dtype": "bfloat16"}, arch("gfx1100"), report)
    assert report.lines["dropped"] == [("torch_dtype: bfloat16 (not a LLaMA-Factory training argument: training "
                                        "precision comes from bf16/fp16, here no bf16/fp16)")]


def test_owned_keys_never_carried_each_said():
    report = Report()
    args = {"dataset": "d", "output_dir": "saves/x", "overwrite_output_dir": True, "resume_from_checkpoint": "saves/x/c-5",
            "bf16": True, "fp16": False, "torch_dtype": "float16", "deepspeed": "ds.json", "gpu_ids": "0,1",
            "ddp_backend": "nccl", "flash_attn": "fa2"}
    out = translate.drop_owned(args, arch("gfx942"), report)
    assert out == {"dataset": "d"}
    text = "\n".join(report.lines["dropped"])
    assert "overwrite_output_dir: True (never carried: it destroys earlier results" in text
    assert "resume_from_checkpoint: saves/x/c-5 (resume with `make train RESUME=<run dir>|last`" in text
    assert "output_dir: saves/x (every run writes to its own runs/<name>/output" in text
    assert "gpu_ids: 0,1 (not a LLaMA-Factory argument: GPUS=" in text
    assert "ddp_backend: nccl (the default on AMD GPUs" in text
    assert "flash_attn: fa2 (what rocmft sets for gfx942)" in text


def test_an_explicit_attention_choice_is_the_users():
    """flash_attn is dropped only where rocmft's render would put the same value: after every other key."""
    report = Report()
    assert translate.drop_owned({"flash_attn": "fa2", "dataset": "d"}, arch("gfx942"), report) == {"flash_attn": "fa2", "dataset": "d"}
    assert translate.drop_owned({"dataset": "d", "flash_attn": "sdpa"}, arch("gfx942"), report)["flash_attn"] == "sdpa"


def test_layout_from_the_command_line():
    report = Report()
    launch = command.parse("HIP_VISIBLE_DEVICES=2,3 NNODES=2 lmf train x.yaml")
    assert translate.launch_layout(None, launch, {}, arch("gfx942"), report) == (2, 2, "2,3")
    assert "2 GPU(s) listed (2,3) -> gpus_per_node: 2" in report.lines["translated"]
    assert "train on GPUs 2,3 (as your command chose): GPUS=2,3 on `make train`" in report.lines["advice"]
    given = translate.launch_layout("4", command.parse("NPROC_PER_NODE=8 lmf train x.yaml"), {}, arch("gfx942"), Report())
    assert given == (4, 1, "")  # GPUS_PER_NODE= wins over the script
    assert translate.launch_layout(None, command.parse(""), {}, arch("gfx942"), Report()) == (1, 1, "")


def test_two_device_variables_that_disagree_are_said():
    report = Report()
    translate.launch_layout(None, command.parse("ROCR_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=1 lmf train x.yaml"), {},
                            arch("gfx942"), report)
    assert any("both set" in line for line in report.lines["advice"])


@pytest.mark.parametrize("name, value, target, kept, said", [
    ("HSA_OVERRIDE_GFX_VERSION", "9.4.2", "gfx942", False, "gfx942 needs no override"),
    ("HSA_OVERRIDE_GFX_VERSION", "11.0.0", "gfx942", False, "would make ROCm load gfx1100's kernels on a gfx942"),
    ("PYTORCH_ROCM_ARCH", "gfx942", "gfx942", False, "a build setting"),
    ("NCCL_DEBUG", "INFO", "gfx942", False, "for debugging, not for every run"),
    ("PYTORCH_HIP_ALLOC_CONF", "malloc_async:true", "gfx1100", False, "not an allocator option PyTorch documents"),
    ("PYTORCH_HIP_ALLOC_CONF", "expandable_segments:True", "gfx1100", True, "-> env:"),
    ("MASTER_PORT", "29500", "gfx942", False, "set by rocmft's launcher"),
    ("HF_TOKEN", "hf_secret", "gfx942", False, "a secret never goes in a recipe"),
    ("HIP_FORCE_DEV_KERNARG", "1", "gfx942", False, "already set for gfx942 (docker/arches.yaml)"),
    ("NCCL_SOCKET_IFNAME", "ens1", "gfx942", True, "-> env: (passed to the job)"),
])
def test_environment(name, value, target, kept, said):
    report = Report()
    env = translate.environment(command.parse(f"export {name}={value}"), arch(target), report)
    assert (name in env) is kept
    lines = report.lines["translated" if kept else "dropped"]
    assert any(said in line for line in lines), report.lines
    assert "hf_secret" not in str(report.lines)


def test_arch_from_a_rendered_header_then_the_command(monkeypatch):
    monkeypatch.setattr("rocmft.hardware.host.gpus_from_sysfs", list)
    report = Report()
    rendered = Source(path=None, args={}, yaml_args={}, rendered_for="gfx1100")
    assert translate.choose_arch(None, rendered, command.parse("PYTORCH_ROCM_ARCH=gfx942 true"), report).name == "gfx1100"
    plain = Source(path=None, args={}, yaml_args={}, rendered_for="")
    assert translate.choose_arch(None, plain, command.parse("export PYTORCH_ROCM_ARCH=gfx942"), report).name == "gfx942"
    with pytest.raises(ProblemReport, match="which GPU will train it"):
        translate.choose_arch(None, plain, command.parse("export PYTORCH_ROCM_ARCH='gfx90a;gfx942'"), report)
