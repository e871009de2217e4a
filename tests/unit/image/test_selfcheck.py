"""The image's build-time self-check.

The CPU branch runs against this venv's real stack (the CPU image installs the same lock): its passes and
its failures (a torch, DeepSpeed, LLaMA-Factory or Python other than expected, a package that cannot
import) come from the real packages. The ROCm branch cannot run here (no ROCm torch, no flash-attn build):
those tests install FAKE torch/llamafactory/deepspeed/flash_attn modules and say so in their names; they
show the checks' logic on what a ROCm image reports, not that a ROCm image passes."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from rocmft.hardware import arches
from rocmft.image import selfcheck


def install_fake_rocm_stack(monkeypatch, *, torch_version="2.10.0+rocm7.2.4", hip="7.2.26000", cuda=None,
                  lf="0.9.5", ds="0.19.8", broken_lf=False, fa_triton=False):
    fa = types.ModuleType("flash_attn")
    fa.__path__ = []
    fa.flash_attn_func = lambda *a, **k: None
    fai = types.ModuleType("flash_attn.flash_attn_interface")
    fai.USE_TRITON_ROCM = fa_triton  # flash-attn 2.8.3 sets it at import from FLASH_ATTENTION_TRITON_AMD_ENABLE
    fa.flash_attn_interface = fai
    monkeypatch.setitem(sys.modules, "flash_attn", fa)
    monkeypatch.setitem(sys.modules, "flash_attn.flash_attn_interface", fai)
    for name in ("torchaudio", "torchvision", "bitsandbytes"):
        module = types.ModuleType(name)
        module.__version__ = "0.0-fake"
        monkeypatch.setitem(sys.modules, name, module)
    torch = types.ModuleType("torch")
    torch.__version__ = torch_version
    torch.version = types.SimpleNamespace(hip=hip, cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", torch)
    if broken_lf:
        monkeypatch.setitem(sys.modules, "llamafactory", None)  # import raises ImportError
    else:
        lfm = types.ModuleType("llamafactory")
        lfm.__version__ = lf
        lfm.__path__ = []
        data = types.ModuleType("llamafactory.data")
        data.__path__ = []
        monkeypatch.setitem(sys.modules, "llamafactory", lfm)
        monkeypatch.setitem(sys.modules, "llamafactory.data", data)
        monkeypatch.setitem(sys.modules, "llamafactory.data.mm_plugin", types.ModuleType("llamafactory.data.mm_plugin"))
        monkeypatch.setitem(sys.modules, "llamafactory.hparams", types.ModuleType("llamafactory.hparams"))
    dsm = types.ModuleType("deepspeed")
    dsm.__version__ = ds
    dsm.__path__ = []
    acc = types.ModuleType("deepspeed.accelerator")
    acc.get_accelerator = lambda: types.SimpleNamespace(device_name=lambda: "cuda")
    monkeypatch.setitem(sys.modules, "deepspeed", dsm)
    monkeypatch.setitem(sys.modules, "deepspeed.accelerator", acc)


def fake_installed_dists(monkeypatch, dists: dict[str, str]):
    monkeypatch.setattr(selfcheck, "_installed", lambda: dict(dists))


ROCM = dict(arch="gfx942", torch_from="base", torch_version="2.10.0", llamafactory="0.9.5", deepspeed="0.19.8",
            flash_attn="ck", flash_attn_mode="auto", flash_attn_version="2.8.3.post2",
            packages={"bitsandbytes": "0.50.2", "deepspeed": "0.19.8", "flash-attn": "2.8.3.post2"})


def by_name(checks):
    return {c.name: c for c in checks}


def test_fake_rocm_stack_passes(monkeypatch):
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "torch": "2.10.0"})
    checks = selfcheck.run_checks(**ROCM)
    assert all(c.ok for c in checks), checks
    assert "HIP 7.2.26000" in by_name(checks)["torch"].detail


def test_fake_rocm_stack_triton_flash_attn_imported_without_its_runtime_variable_fails(monkeypatch):
    # flash-attn 2.8.3 flash_attn/flash_attn_interface.py: USE_TRITON_ROCM is read at import; a Triton build
    # imported with it off would look for flash_attn_2_cuda, which was never compiled.
    install_fake_rocm_stack(monkeypatch, fa_triton=False)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "torch": "2.10.0"})
    rdna = {**ROCM, "arch": "gfx1100", "flash_attn": "triton"}
    assert not by_name(selfcheck.run_checks(**rdna))["flash-attn Triton kernels"].ok
    install_fake_rocm_stack(monkeypatch, fa_triton=True)
    check = by_name(selfcheck.run_checks(**rdna))["flash-attn Triton kernels"]
    assert check.ok and "Triton" in check.detail


def test_fake_cuda_torch_on_a_rocm_image_fails(monkeypatch):
    install_fake_rocm_stack(monkeypatch, torch_version="2.10.0+cu128", hip=None, cuda="12.8")
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "nvidia-cublas-cu12": "12.8"})
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["torch is a ROCm build"].ok and checks["torch is a ROCm build"].skipped == ""
    assert not checks["no nvidia packages"].ok and "nvidia-cublas-cu12" in checks["no nvidia packages"].detail


def test_fake_rocm_stack_missing_kernels_are_reported(monkeypatch):
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {})
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["flash-attn"].ok and "missing" in checks["flash-attn"].detail
    assert not checks["bitsandbytes"].ok


def real_cpu(**changes) -> dict:
    """The CPU image's expectations, met by this venv (the same lock)."""
    import importlib.metadata as md

    return {**dict(arch="cpu", torch_from="wheels", torch_version=md.version("torch").split("+")[0],
                   llamafactory=md.version("llamafactory"), deepspeed=md.version("deepspeed"), flash_attn="none",
                   flash_attn_mode="auto", flash_attn_version="",
                   packages=dict(arches.table()["cpu"].image_packages)), **changes}


def test_real_cpu_stack_passes_with_every_import():
    before = dict(os.environ)
    try:  # the self-check is a process of its own in the image; here lm_eval's and sklearn's imports set HF_*/KMP_*
        found = by_name(selfcheck.run_checks(**real_cpu()))
    finally:
        for name in set(os.environ) - set(before):
            del os.environ[name]
    assert all(c.ok for c in found.values()), found
    # the cpu arch's packages (docker/arches.yaml), each at its version and imported for real
    listed = {n for n in arches.table()["cpu"].image_packages if n != "deepspeed"}
    assert listed == {"bitsandbytes", "jieba", "lm-eval", "matplotlib", "nltk", "rouge-chinese", "tensorboard", "wandb",
                      "mlflow-skinny"}
    assert set(found) == {"torch", "no nvidia packages", "llamafactory imports", "deepspeed imports", "flash-attn",
                          "bitsandbytes", "liger-kernel", "torchaudio imports", "torchvision removed",
                          *listed, *(f"{n} imports" for n in listed)}
    assert found["rouge-chinese imports"].detail == "import rouge_chinese"
    assert found["lm-eval imports"].detail == "import lm_eval.evaluator"  # the harness's entry, not a bare package
    # matplotlib's distribution also ships mpl_toolkits: the check imports the package itself
    assert found["matplotlib imports"].detail == "import matplotlib"
    assert "CPU build: cuda=None, hip=None" in found["torch"].detail
    assert "accelerator cpu" in found["deepspeed imports"].detail


def test_real_cpu_stack_against_other_expected_versions_fails():
    found = by_name(selfcheck.run_checks(**real_cpu(torch_version="2.12.0", deepspeed="0.18.0", llamafactory="0.9.4",
                                                   packages={**arches.table()["cpu"].image_packages,
                                                             "bitsandbytes": "0.49.0"})))
    assert not found["torch"].ok and "expected 2.12.0" in found["torch"].detail
    assert not found["deepspeed imports"].ok and "expected 0.18.0" in found["deepspeed imports"].detail
    assert not found["llamafactory imports"].ok and "expected 0.9.4" in found["llamafactory imports"].detail
    assert not found["bitsandbytes"].ok and "0.49.0" in found["bitsandbytes"].detail  # the venv has 0.50.2


def test_real_cpu_stack_a_package_that_cannot_import_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "llamafactory", None)  # the import raises, as with a broken install
    found = by_name(selfcheck.run_checks(**real_cpu()))
    assert not found["llamafactory imports"].ok and "ModuleNotFoundError" in found["llamafactory imports"].detail
    assert found["torch"].ok and found["deepspeed imports"].ok  # each check on its own


def test_real_cpu_stack_with_torchvision_listed_fails(monkeypatch):
    """The one fake here: the list of installed distributions gains PyPI's CUDA torchvision."""
    fake_installed_dists(monkeypatch, {**selfcheck._installed(), "torchvision": "0.28.0"})
    assert not by_name(selfcheck.run_checks(**real_cpu()))["torchvision removed"].ok


def test_fake_rocm_stack_skipped_flash_attn_must_be_absent(monkeypatch):
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {"bitsandbytes": "0.50.2"})
    checks = by_name(selfcheck.run_checks(**{**ROCM, "flash_attn_mode": "skip"}))
    assert checks["flash-attn"].ok and "FLASH_ATTN=skip" in checks["flash-attn"].detail


def test_main_writes_and_shows_the_report_real_cpu_stack(tmp_path, capsys):
    expected = real_cpu()
    out = tmp_path / "selfcheck.json"
    argv = ["--arch", "cpu", "--torch-from", "wheels", "--torch", expected["torch_version"], "--llamafactory",
            expected["llamafactory"], "--deepspeed", expected["deepspeed"], "--flash-attn", "none",
            "--python", "{}.{}".format(*sys.version_info[:2]), "--write", str(out),
            "--packages", " ".join(f"{k}=={v}" for k, v in expected["packages"].items())]
    assert selfcheck.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["passed"] and data["arch"] == "cpu"
    assert selfcheck.main(["--show", str(out)]) == 0
    assert "PASSED" in capsys.readouterr().out
    data["passed"] = False
    out.write_text(json.dumps(data))
    assert selfcheck.main(["--show", str(out)]) == 1
    assert selfcheck.main([*argv[:5], "2.0.0", *argv[6:]]) == 1  # a torch other than the one expected


def test_main_needs_the_expectations():
    with pytest.raises(SystemExit):
        selfcheck.main(["--arch", "cpu"])


def test_python_version_is_checked_real_cpu_stack():
    here = "{}.{}".format(*sys.version_info[:2])
    assert by_name(selfcheck.run_checks(**real_cpu(), python=here))["python"].ok
    assert not by_name(selfcheck.run_checks(**real_cpu(), python="2.7"))["python"].ok


def test_fake_rocm_stack_a_listed_package_missing_or_unimportable_fails(monkeypatch):
    # liger-kernel listed by the arch table but not installed: the build fails (issue 31's run-breaker 1)
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    checks = by_name(selfcheck.run_checks(**{**ROCM, "packages": {**ROCM["packages"], "liger-kernel": "0.8.2"}}))
    assert not checks["liger-kernel"].ok and "missing (expected 0.8.2)" in checks["liger-kernel"].detail
    # installed, but its import (liger_kernel.transformers, what LLaMA-Factory imports) fails
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "liger-kernel": "0.8.2"})
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", None)
    checks = by_name(selfcheck.run_checks(**{**ROCM, "packages": {**ROCM["packages"], "liger-kernel": "0.8.2"}}))
    assert checks["liger-kernel"].ok and not checks["liger-kernel imports"].ok


def test_fake_rocm_stack_a_gpu_package_the_table_leaves_out_must_be_absent(monkeypatch):
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "liger-kernel": "0.8.2"})
    checks = by_name(selfcheck.run_checks(**ROCM))  # ROCM's list has no liger-kernel
    assert not checks["liger-kernel"].ok and "not in the arch's packages" in checks["liger-kernel"].detail


def test_fake_rocm_stack_without_torchvision_fails(monkeypatch):
    install_fake_rocm_stack(monkeypatch)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    monkeypatch.setitem(sys.modules, "torchvision", None)
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["torchvision imports"].ok and checks["torchaudio imports"].ok


def test_fake_cuda_torch_rehearsal_skips_only_the_named_hip_checks(monkeypatch):
    """The rehearsal (REHEARSAL=1) marks exactly REHEARSAL_SKIPS as skipped, keeps what they found, and still
    fails on anything else: here the nvidia packages a CUDA stack brings."""
    install_fake_rocm_stack(monkeypatch, torch_version="2.10.0+cpu", hip=None, fa_triton=True)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "nvidia-cublas-cu12": "12.8"})
    checks = selfcheck.skip_for_rehearsal(selfcheck.run_checks(**ROCM))
    skipped = {c.name for c in checks if c.skipped}
    assert skipped == {"torch is a ROCm build", "flash-attn CK kernels", "torchvision imports"}
    assert "found: HIP None" in by_name(checks)["torch is a ROCm build"].detail
    data = selfcheck.report("gfx942", checks, rehearsal=True)
    assert not data["passed"]  # the nvidia package still fails it
    text = selfcheck.render(data)
    assert "REHEARSAL on a CPU base, not a usable image" in text and "  skip torch is a ROCm build" in text
    assert set(selfcheck.REHEARSAL_SKIPS) == skipped


def test_without_rehearsal_nothing_is_skipped(monkeypatch):
    install_fake_rocm_stack(monkeypatch, torch_version="2.10.0+cpu", hip=None)
    fake_installed_dists(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    checks = selfcheck.run_checks(**ROCM)
    assert not any(c.skipped for c in checks) and not by_name(checks)["torch is a ROCm build"].ok
