"""The ROCm images' rehearsal, for real: docker/Dockerfile's ROCm branch built for gfx1100 and gfx942 on a CPU base
(rocmft.image.rehearsal: a CPU torch stands in for ROCm's, PyPI's triton for ROCm's, the flash-attn Triton wheel for
the CK compile). Built by CI beforehand (`make rehearsal`, after `make wheelhouse ARCH=cpu`); this file never builds.

Skipped only when no Docker daemon is configured at all; with one, a missing rehearsal image FAILS.
"""

from __future__ import annotations

import json

import pytest

from rocmft.hardware import arches
from rocmft.image import docker_api, find_image, rehearsal
from rocmft.image.selfcheck import REHEARSAL_SKIPS
from rocmft.hardware.versions import from_lock
from tests.docker.test_image import client  # noqa: F401 - the one daemon fixture of the image tests
from tests.docker.test_image import run_container

pytestmark = pytest.mark.docker

BUILD_HINT = "build them first: make wheelhouse ARCH=cpu; make rehearsal"




@pytest.fixture(scope="module", params=rehearsal.ARCHES)
def image(request, client):
    found = docker_api.get_image(client, rehearsal.tag(request.param))
    if found is None:
        pytest.fail(f"no {rehearsal.tag(request.param)}: {BUILD_HINT}")
    return request.param, found


def test_rehearsal_labels_are_the_rehearsal_plan_and_never_a_usable_tag(client, image):
    name, img = image
    labels = docker_api.image_labels(img)
    wheels = rehearsal.folder()
    plan = rehearsal.plan_for(arches.table()[name], from_lock(), labels.get("ai.rocmft.commit", ""), wheels,
                              kernel_wheel=rehearsal.triton_wheel(wheels, from_lock()))
    for key, value in plan.labels.items():
        if key in ("ai.rocmft.commit", "org.opencontainers.image.revision"):
            continue
        assert labels.get(key) == value, f"label {key}: image has {labels.get(key)!r}, plan says {value!r}"
    # What the ROCm branch installs, each labelled with its table version (liger-kernel --no-deps, flash-attn).
    assert labels["ai.rocmft.liger_kernel"] == "0.8.2" and labels["ai.rocmft.rehearsal"] == "1"
    assert "flash-attn==" in labels["ai.rocmft.packages"] and "bitsandbytes==" in labels["ai.rocmft.packages"]
    assert set(img.tags) == {rehearsal.tag(name)}
    assert not any(t.startswith("rocmft:") for t in img.tags)
    assert find_image(client, name) is None or find_image(client, name).id != img.id


def test_rehearsal_self_check_skipped_only_the_named_hip_checks(client, image):
    name, img = image
    code, out = run_container(client, img, ["cat", "/opt/rocmft/selfcheck.json"], environment={"ROCMFT_SKIP_GPU_CHECK": "1"})
    assert code == 0, out
    report = json.loads(out)
    assert report["passed"] and report["rehearsal"] is True
    checks = {c["name"]: c for c in report["checks"]}
    skipped = {n for n, c in checks.items() if c.get("skipped")}
    expected = set(REHEARSAL_SKIPS) if arches.table()[name].flash_attn == "ck" else set(REHEARSAL_SKIPS) - {
        "flash-attn CK kernels"}
    assert skipped == expected
    for ran in ("torch", "llamafactory imports", "deepspeed imports", "no nvidia packages", "flash-attn imports",
                "liger-kernel imports", "bitsandbytes imports", "torchaudio imports", "lm-eval imports"):
        assert checks[ran]["ok"] and not checks[ran].get("skipped"), checks.get(ran)
    if name == "gfx1100":
        assert checks["flash-attn Triton kernels"]["ok"] and not checks["flash-attn Triton kernels"].get("skipped")


PROBE = r"""
import json, os, sys
from importlib import metadata
import liger_kernel.transformers, bitsandbytes, deepspeed, triton
from flash_attn import flash_attn_interface as fai
from deepspeed.accelerator import get_accelerator
kernels = json.load(open("/opt/rocmft/kernels.json"))
print(json.dumps({
    "liger": metadata.version("liger-kernel"), "bnb": bitsandbytes.__version__, "ds": deepspeed.__version__,
    "triton": triton.__version__, "triton_file": triton.__file__, "fa": metadata.version("flash-attn"),
    "fa_triton": bool(fai.USE_TRITON_ROCM), "accelerator": get_accelerator().device_name(),
    "venv_dists": sorted(d.metadata["Name"].lower() for d in metadata.distributions(path=[p for p in sys.path if p.startswith("/opt/rocmft/venv")])),
    "kernels": kernels, "arch": os.environ.get("ROCMFT_IMAGE_ARCH"),
}))
"""


def test_rehearsal_imports_liger_flash_attn_triton_bitsandbytes_deepspeed(client, image):
    """Run time, not build time: each package of the ROCm branch imports in the container; liger-kernel went in
    --no-deps, so triton is the base's (/opt/venv: standing in for ROCm's), never one installed into the venv."""
    name, img = image
    code, out = run_container(client, img, ["python", "-c", PROBE], environment={"ROCMFT_SKIP_GPU_CHECK": "1"})
    assert code == 0, out
    data = json.loads(out.strip().splitlines()[-1])
    assert (data["liger"], data["bnb"], data["fa"]) == ("0.8.2", "0.50.2", "2.8.3.post2")
    assert data["ds"] == from_lock().deepspeed and data["accelerator"] == "cuda"
    assert data["fa_triton"] is True and data["arch"] == name
    assert data["triton_file"].startswith("/opt/venv/") and "triton" not in data["venv_dists"]
    # gfx1100: the kernel stage built the Triton wheel from the sdist; gfx942: that wheel, kept on the host.
    assert data["kernels"]["source"] == ("built" if name == "gfx1100" else "host"), data["kernels"]
    assert data["kernels"]["wheels"] == "flash_attn-2.8.3.post2-py3-none-any.whl"
