"""The image's build-time self-check, against fake torch/llamafactory/deepspeed modules (no imports of
the real stack: fast, and the ROCm branch can be exercised on a CPU machine)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from rocmft.image import selfcheck


def install_fakes(monkeypatch, *, torch_version="2.10.0+rocm7.2.4", hip="7.2.26000", cuda=None,
                  lf="0.9.5", ds="0.19.8", broken_lf=False, fa_triton=False):
    fa = types.ModuleType("flash_attn")
    fa.__path__ = []
    fa.flash_attn_func = lambda *a, **k: None
    fai = types.ModuleType("flash_attn.flash_attn_interface")
    fai.USE_TRITON_ROCM = fa_triton  # flash-attn 2.8.3 sets it at import from FLASH_ATTENTION_TRITON_AMD_ENABLE
    fa.flash_attn_interface = fai
    monkeypatch.setitem(sys.modules, "flash_attn", fa)
    monkeypatch.setitem(sys.modules, "flash_attn.flash_attn_interface", fai)
    audio = types.ModuleType("torchaudio")
    audio.__version__ = "2.13.0"
    monkeypatch.setitem(sys.modules, "torchaudio", audio)
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


def fake_installed(monkeypatch, dists: dict[str, str]):
    monkeypatch.setattr(selfcheck, "_installed", lambda: dict(dists))


ROCM = dict(arch="gfx942", torch_from="base", torch_version="2.10.0", llamafactory="0.9.5", deepspeed="0.19.8",
            flash_attn="ck", flash_attn_mode="auto", flash_attn_version="2.8.3.post2", bitsandbytes="0.50.2")


def by_name(checks):
    return {c.name: c for c in checks}


def test_rocm_image_passes(monkeypatch):
    install_fakes(monkeypatch)
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "torch": "2.10.0"})
    checks = selfcheck.run_checks(**ROCM)
    assert all(c.ok for c in checks), checks
    assert "HIP 7.2.26000" in by_name(checks)["torch"].detail


def test_triton_flash_attn_imported_without_its_runtime_variable_fails(monkeypatch):
    # flash-attn 2.8.3 flash_attn/flash_attn_interface.py: USE_TRITON_ROCM is read at import; a Triton build
    # imported with it off would look for flash_attn_2_cuda, which was never compiled.
    install_fakes(monkeypatch, fa_triton=False)
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "torch": "2.10.0"})
    rdna = {**ROCM, "arch": "gfx1100", "flash_attn": "triton"}
    assert not by_name(selfcheck.run_checks(**rdna))["flash-attn imports"].ok
    install_fakes(monkeypatch, fa_triton=True)
    check = by_name(selfcheck.run_checks(**rdna))["flash-attn imports"]
    assert check.ok and "Triton" in check.detail


def test_cuda_torch_on_a_rocm_image_fails(monkeypatch):
    install_fakes(monkeypatch, torch_version="2.10.0+cu128", hip=None, cuda="12.8")
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2", "nvidia-cublas-cu12": "12.8"})
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["torch"].ok
    assert not checks["no nvidia packages"].ok and "nvidia-cublas-cu12" in checks["no nvidia packages"].detail


def test_replaced_torch_version_fails(monkeypatch):
    install_fakes(monkeypatch, torch_version="2.14.0+rocm7.2")
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["torch"].ok and "expected 2.10.0" in checks["torch"].detail


def test_cpu_image_checks(monkeypatch):
    install_fakes(monkeypatch, torch_version="2.13.0+cpu", hip=None)
    fake_installed(monkeypatch, {"torch": "2.13.0+cpu"})
    checks = by_name(selfcheck.run_checks(arch="cpu", torch_from="wheels", torch_version="2.13.0", llamafactory="0.9.5",
                                          deepspeed="0.19.8", flash_attn="none", flash_attn_mode="auto",
                                          flash_attn_version="2.8.3.post2", bitsandbytes=""))
    assert all(c.ok for c in checks.values()), checks
    assert "torchvision removed" in checks
    fake_installed(monkeypatch, {"torchvision": "0.28.0"})
    checks = by_name(selfcheck.run_checks(arch="cpu", torch_from="wheels", torch_version="2.13.0", llamafactory="0.9.5",
                                          deepspeed="0.19.8", flash_attn="none", flash_attn_mode="auto",
                                          flash_attn_version="", bitsandbytes=""))
    assert not checks["torchvision removed"].ok


def test_import_failure_and_missing_kernels_are_reported(monkeypatch):
    install_fakes(monkeypatch, broken_lf=True, ds="0.18.0")
    fake_installed(monkeypatch, {})
    checks = by_name(selfcheck.run_checks(**ROCM))
    assert not checks["llamafactory imports"].ok and "ModuleNotFoundError" in checks["llamafactory imports"].detail
    assert not checks["deepspeed imports"].ok
    assert not checks["flash-attn"].ok and "missing" in checks["flash-attn"].detail
    assert not checks["bitsandbytes"].ok


def test_skipped_flash_attn_must_be_absent(monkeypatch):
    install_fakes(monkeypatch)
    fake_installed(monkeypatch, {"bitsandbytes": "0.50.2"})
    checks = by_name(selfcheck.run_checks(**{**ROCM, "flash_attn_mode": "skip"}))
    assert checks["flash-attn"].ok and "FLASH_ATTN=skip" in checks["flash-attn"].detail


def test_main_writes_and_shows_the_report(monkeypatch, tmp_path, capsys):
    install_fakes(monkeypatch)
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    out = tmp_path / "selfcheck.json"
    argv = ["--arch", "gfx942", "--torch-from", "base", "--torch", "2.10.0", "--llamafactory", "0.9.5",
            "--deepspeed", "0.19.8", "--flash-attn", "ck", "--flash-attn-version", "2.8.3.post2",
            "--bitsandbytes", "0.50.2", "--write", str(out)]
    assert selfcheck.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["passed"] and data["arch"] == "gfx942"
    assert selfcheck.main(["--show", str(out)]) == 0
    assert "PASSED" in capsys.readouterr().out
    data["passed"] = False
    out.write_text(json.dumps(data))
    assert selfcheck.main(["--show", str(out)]) == 1


def test_main_needs_the_expectations():
    with pytest.raises(SystemExit):
        selfcheck.main(["--arch", "cpu"])


def test_python_version_is_checked(monkeypatch):
    install_fakes(monkeypatch)
    fake_installed(monkeypatch, {"flash-attn": "2.8.3.post2", "bitsandbytes": "0.50.2"})
    here = "{}.{}".format(*sys.version_info[:2])
    assert by_name(selfcheck.run_checks(**ROCM, python=here))["python"].ok
    assert not by_name(selfcheck.run_checks(**ROCM, python="2.7"))["python"].ok


def test_cpu_self_check_imports_what_the_cpu_image_ships():
    # The real stack of this venv (the CPU image's is the same lock): every import the check claims must work.
    import importlib.metadata as md

    checks = selfcheck.run_checks(arch="cpu", torch_from="wheels", torch_version=md.version("torch").split("+")[0],
                                  llamafactory=md.version("llamafactory"), deepspeed=md.version("deepspeed"),
                                  flash_attn="none", flash_attn_mode="auto", flash_attn_version="", bitsandbytes="")
    found = by_name(checks)
    for name in ("torch", "llamafactory imports", "deepspeed imports", "torchaudio imports"):
        assert found[name].ok, found[name]
    assert found["flash-attn"].ok and "flash-attn imports" not in found
