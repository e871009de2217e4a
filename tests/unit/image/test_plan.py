"""The image build plan: pinned for gfx942 and gfx1100, build args checked for every arch of the table,
and kept in step with docker/Dockerfile (every build arg declared, every label written)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.hardware.versions import Versions, from_lock, read_pins
from rocmft.image import build_plan, tags
from rocmft.image.plan import LABEL_PREFIX

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()
VERSIONS = Versions(project="0.1.0", llamafactory="0.9.5", deepspeed="0.19.8", torch_cpu="2.13.0",
                    flash_attn="2.8.3.post2", bitsandbytes="0.50.2", build_deps=("setuptools==84.2.1", "wheel==0.48.0"),
                    kernel_tools=("ninja==1.13.2", "packaging==26.4", "psutil==7.2.2"))
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ROCM_BASE = arches.table()["gfx942"].base_image


def plan_for(name: str, **kw):
    return build_plan(arches.table()[name], VERSIONS, COMMIT, offline=kw.pop("offline", False), **kw)


def test_gfx942_plan_is_pinned():
    plan = plan_for("gfx942")
    assert dict(plan.buildargs) == {
        "ARCH": "gfx942",
        "BASE_IMAGE": ROCM_BASE,
        "BITSANDBYTES_LABEL": "0.50.2",
        "BUILD_DEPS": "setuptools==84.2.1 wheel==0.48.0",
        "DEEPSPEED_VERSION": "0.19.8",
        "DS_ACCELERATOR": "cuda",
        "FLASH_ATTN": "auto",
        # flash-attn 2.8.3 flash_attn/flash_attn_interface.py reads it at import: FALSE = the CK extension.
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "FALSE",
        "FLASH_ATTN_BACKEND": "ck",
        # The planner's model table has head dims 64 and 128 only (flash-attn 2.8.3 setup.py: OPT_DIM).
        "FLASH_ATTN_HEAD_DIMS": "64,128",
        "FLASH_ATTN_LABEL": "ck-2.8.3.post2 (gfx942)",
        "FLASH_ATTN_VERSION": "2.8.3.post2",
        "GIT_COMMIT": COMMIT,
        "GPU_ARCHS": "gfx942",
        # docker/arches.yaml `packages:` for gfx942: all of them, and the two lists pip installs
        "IMAGE_PACKAGES": "bitsandbytes==0.50.2 deepspeed==0.19.8 flash-attn==2.8.3.post2 jieba==0.42.1 "
                          "liger-kernel==0.8.2 lm-eval==0.4.13 matplotlib==3.11.2 mlflow-skinny==3.18.0 nltk==3.10.4 "
                          "rouge-chinese==1.0.3 tensorboard==2.21.0 wandb==0.31.0",
        "PACKAGES": "bitsandbytes==0.50.2 jieba==0.42.1 lm-eval==0.4.13 matplotlib==3.11.2 mlflow-skinny==3.18.0 "
                    "nltk==3.10.4 rouge-chinese==1.0.3 tensorboard==2.21.0 wandb==0.31.0",
        # liger-kernel without its `triton` requirement: ROCm's triton stays (issue 31, run-breaker 1)
        "PACKAGES_NO_DEPS": "liger-kernel==0.8.2",
        "LIGER_KERNEL_LABEL": "0.8.2",
        "KERNEL_BACKEND": "ck",
        # ninja + packaging for the kernel stage's compile (without ninja: one source at a time, ~11 h)
        "KERNEL_TOOLS": "ninja==1.13.2 packaging==26.4 psutil==7.2.2",
        "LLAMAFACTORY_VERSION": "0.9.5",
        "MAX_JOBS": "1",
        "OFFLINE": "0",
        "PROJECT_VERSION": "0.1.0",
        "PYTHON_VERSION": "3.12",
        "PYTORCH_ROCM_ARCH": "gfx942",
        "REHEARSAL": "0",  # 1 only in CI's rehearsal on a CPU base (never tagged rocmft:<arch>)
        "ROCM_VERSION": "7.2.4",
        "TORCH_FROM": "base",
        "TORCH_VERSION": "2.10.0",
        "WHEELHOUSE": "wheelhouse/gfx942",
    }
    assert plan.tags == ("rocmft:0.1.0-gfx942", "rocmft:gfx942")
    assert plan.network_mode is None and not plan.offline
    assert plan.dockerfile == "docker/Dockerfile" and plan.target == "image"
    assert plan.labels[LABEL_PREFIX + "arch"] == "gfx942"
    assert plan.labels[LABEL_PREFIX + "flash_attn"] == "ck-2.8.3.post2 (gfx942)"
    assert plan.labels[LABEL_PREFIX + "liger_kernel"] == "0.8.2"
    assert plan.labels[LABEL_PREFIX + "packages"] == plan.buildargs["IMAGE_PACKAGES"]
    assert plan.labels[LABEL_PREFIX + "rehearsal"] == "0"
    assert plan.labels["org.opencontainers.image.revision"] == COMMIT


def test_gfx1100_plan_is_pinned():
    plan = plan_for("gfx1100", flash_attn="auto")
    args = dict(plan.buildargs)
    assert args["BASE_IMAGE"] == ROCM_BASE
    assert args["PYTORCH_ROCM_ARCH"] == args["GPU_ARCHS"] == "gfx1100"
    # RDNA: no CK flash-attn; the Triton backend (FLASH_ATTENTION_TRITON_AMD_ENABLE) instead.
    assert args["FLASH_ATTN_BACKEND"] == "triton"
    assert args["FLASH_ATTN_LABEL"] == "triton-2.8.3.post2 (gfx1100)"
    assert (args["TORCH_FROM"], args["TORCH_VERSION"], args["ROCM_VERSION"]) == ("base", "2.10.0", "7.2.4")
    assert args["DS_ACCELERATOR"] == "cuda" and "DS_BUILD_OPS" not in args  # no prebuilt DeepSpeed op
    # flash-attn 2.8.3 flash_attn_interface.py: USE_TRITON_ROCM = os.getenv("FLASH_ATTENTION_TRITON_AMD_ENABLE")
    # at import, so the image's runtime ENV (this build arg) must say TRUE for a Triton build.
    assert args["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert "bitsandbytes==0.50.2" in args["PACKAGES"] and args["PACKAGES_NO_DEPS"] == "liger-kernel==0.8.2"
    assert plan.tags == ("rocmft:0.1.0-gfx1100", "rocmft:gfx1100")
    # Everything but the arch-specific values is the same as gfx942's: one Dockerfile, one recipe.
    other = dict(plan_for("gfx942").buildargs)
    differing = {k for k in args if args[k] != other[k]}
    # The Triton backend compiles nothing: no head dims, no compile jobs.
    assert differing == {"ARCH", "PYTORCH_ROCM_ARCH", "GPU_ARCHS", "FLASH_ATTN_BACKEND", "FLASH_ATTN_LABEL", "WHEELHOUSE",
                         "FLASH_ATTENTION_TRITON_AMD_ENABLE", "KERNEL_BACKEND", "FLASH_ATTN_HEAD_DIMS", "MAX_JOBS"}
    assert (args["KERNEL_BACKEND"], args["FLASH_ATTN_HEAD_DIMS"], args["MAX_JOBS"]) == ("triton", "", "0")


def test_dry_run_plans_show_the_runtime_flash_attn_variable():
    # The --dry-run text is what a person reads: gfx942 (CK) says FALSE, RDNA Triton builds say TRUE.
    for name, want in (("gfx942", "FALSE"), ("gfx1100", "TRUE"), ("gfx1201", "TRUE")):
        lines = plan_for(name).lines()
        assert any(line.split() == ["FLASH_ATTENTION_TRITON_AMD_ENABLE", want] for line in lines), (name, lines)
        env = arches.table()[name].env
        assert env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE", "FALSE") == want, name


def test_cpu_offline_plan():
    plan = plan_for("cpu", offline=True, wheelhouse="/somewhere/wheelhouse/cpu")
    args = dict(plan.buildargs)
    assert plan.network_mode == "none" and args["OFFLINE"] == "1"
    assert plan.wheelhouse == "/somewhere/wheelhouse/cpu" and args["WHEELHOUSE"] == "wheelhouse/cpu"
    assert args["BASE_IMAGE"] == "rocmft-base:cpu"
    assert (args["TORCH_FROM"], args["TORCH_VERSION"]) == ("wheels", "2.13.0")
    assert (args["DS_ACCELERATOR"], args["ROCM_VERSION"]) == ("cpu", "none") and "DS_BUILD_OPS" not in args
    # bitsandbytes' CPU backend trains tiny-cpu-qlora: the cpu image carries it (docker/arches.yaml)
    assert args["FLASH_ATTN_BACKEND"] == "none" and "bitsandbytes==" in args["PACKAGES"]
    assert args["PACKAGES_NO_DEPS"] == "" and args["LIGER_KERNEL_LABEL"] == "none"
    assert plan.labels[LABEL_PREFIX + "flash_attn"] == "none (no flash-attn backend for cpu)"


@pytest.mark.parametrize("name", list(arches.table()))
def test_build_args_for_every_arch(name):
    arch = arches.table()[name]
    args = dict(plan_for(name).buildargs)
    assert args["ARCH"] == name
    assert args["BASE_IMAGE"] == arch.base_image
    assert args["PYTORCH_ROCM_ARCH"] == arch.pytorch_rocm_arch == args["GPU_ARCHS"]
    assert args["PYTHON_VERSION"] == arch.python
    if arch.is_gpu:
        assert args["BASE_IMAGE"].startswith("rocm/pytorch:rocm7.")
        assert args["PYTORCH_ROCM_ARCH"] == name
        assert (args["TORCH_FROM"], args["TORCH_VERSION"], args["ROCM_VERSION"]) == ("base", arch.torch, arch.rocm)
        assert args["DS_ACCELERATOR"] == "cuda"
    else:
        assert (args["TORCH_FROM"], args["DS_ACCELERATOR"], args["ROCM_VERSION"]) == ("wheels", "cpu", "none")
    want_fa = {"ck": "ck", "triton": "triton"}.get(arch.flash_attn, "none")
    assert args["FLASH_ATTN_BACKEND"] == want_fa
    assert ("bitsandbytes==" in args["PACKAGES"]) == arch.bitsandbytes
    # the build installs exactly the table's list: deepspeed and flash-attn by their own steps, the rest by pip
    installed = {w.split("==")[0]: w.split("==")[1] for w in (args["PACKAGES"] + " " + args["PACKAGES_NO_DEPS"]).split()}
    installed["deepspeed"] = args["DEEPSPEED_VERSION"]
    if args["KERNEL_BACKEND"] != "none":
        installed["flash-attn"] = args["FLASH_ATTN_VERSION"]
    assert installed == dict(arch.image_packages)
    assert args["IMAGE_PACKAGES"] == " ".join(f"{n}=={v}" for n, v in sorted(arch.image_packages.items()))
    assert plan_for(name).tags == tuple(tags(name, "0.1.0"))


def test_cdna_gets_ck_flash_attn_and_rdna_triton():
    table = arches.table()
    for name in ("gfx90a", "gfx942", "gfx950"):
        assert plan_for(name).buildargs["FLASH_ATTN_BACKEND"] == "ck"
    for name in ("gfx1100", "gfx1101", "gfx1201"):
        assert plan_for(name).buildargs["FLASH_ATTN_BACKEND"] == "triton"
    assert table["gfx1030"].flash_attn == "none" and plan_for("gfx1030").buildargs["FLASH_ATTN_BACKEND"] == "none"


def test_flash_attn_skip_is_labelled():
    plan = plan_for("gfx942", flash_attn="skip")
    assert plan.buildargs["FLASH_ATTN"] == "skip"
    assert plan.labels[LABEL_PREFIX + "flash_attn"] == "skipped (FLASH_ATTN=skip)"
    with pytest.raises(ValueError):
        plan_for("gfx942", flash_attn="maybe")


def test_plan_is_pure_and_serialisable():
    assert plan_for("gfx942") == plan_for("gfx942")
    data = plan_for("cpu", offline=True).to_dict()
    assert data["network_mode"] == "none" and data["tags"] == ["rocmft:0.1.0-cpu", "rocmft:cpu"]
    assert "build args" in "\n".join(plan_for("cpu").lines())


def _dockerfile_args() -> set[str]:
    return set(re.findall(r"^ARG ([A-Z_]+)", DOCKERFILE, flags=re.M))


def _dockerfile_labels() -> set[str]:
    block = DOCKERFILE[DOCKERFILE.index("\nLABEL "):]
    return set(re.findall(r"([a-z][a-z0-9_.]+)=\"", block))


def test_every_build_arg_is_declared_in_the_dockerfile():
    assert set(plan_for("gfx942").buildargs) <= _dockerfile_args()


def test_the_dockerfile_writes_exactly_the_planned_labels():
    assert set(plan_for("gfx942").labels) == _dockerfile_labels()


def test_dockerfile_never_bakes_recipes_or_data():
    copies = re.findall(r"^COPY (.+)$", DOCKERFILE, flags=re.M)
    for line in copies:
        for forbidden in ("recipes", "data/", "runs", "ds_configs", "models"):
            assert forbidden not in line, line
    assert not re.search(r"^# syntax=", DOCKERFILE, flags=re.M)  # BuildKit would fetch a frontend image


def test_cpu_torch_matches_the_lock_and_the_table():
    lock = read_pins(ROOT / "requirements" / "lock.txt")
    assert arches.table()["cpu"].torch == lock["torch"] == from_lock().torch_cpu


def test_dry_run_cli_prints_the_plan(capsys):
    assert main(["image", "gfx1100", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "image build plan for gfx1100" in out and "FLASH_ATTN_BACKEND" in out and "triton" in out
    assert main(["image", "gfx942", "--dry-run", "--json"]) == 0
    assert '"TORCH_FROM": "base"' in capsys.readouterr().out


def test_unknown_arch_lists_the_known_ones(capsys):
    assert main(["image", "gfx9999", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown arch `gfx9999`" in err
    for name in arches.table():
        assert name in err
    assert main(["image", "--dry-run"]) == 2
    assert "no arch given" in capsys.readouterr().err


def test_dockerfile_defaults_are_the_gfx942_plan():
    """A bare `docker build -f docker/Dockerfile .` builds what `make image ARCH=gfx942` plans (the
    defaults cannot drift from the arch table and the lock)."""
    defaults = {}
    for name, value in re.findall(r"^ARG ([A-Z_]+)=(.*)$", DOCKERFILE, flags=re.M):
        value = value.strip()
        defaults.setdefault(name, value[1:-1] if value[:1] == value[-1:] == '"' else value)
    plan = build_plan(arches.table()["gfx942"], from_lock(), "unknown", offline=False)
    for name, value in plan.buildargs.items():
        if name in defaults:
            assert defaults[name] == value, f"ARG {name}={defaults[name]} but the gfx942 plan says {value}"
