"""A light host (no torch) in a fresh clone: a recipe naming models/tiny-llama gets it built by the same
builder in the arch's image, before validation (in the image too) looks for it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rocmft.image.docker_api import daemon_configured
from tests.conftest import ROOT, offline_env

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    if not daemon_configured():
        pytest.skip(reason="no Docker daemon configured (DOCKER_HOST unset and no /var/run/docker.sock)")
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run(["bash", "scripts/host-venv.sh"], cwd=ROOT, env={**offline_env(venv.parent), "VENV": str(venv)},
                   check=True, timeout=600)
    return venv


def test_a_light_host_builds_the_tiny_model_in_the_image_then_validates_there(light_venv, tmp_path):
    clone = tmp_path / "clone"
    # requirements/: the arch table reads its packages' versions from the lock (rocmft.hardware.arches)
    for folder in ("recipes", "ds_configs", "data", "scripts", "src", "docker", "requirements"):
        shutil.copytree(ROOT / folder, clone / folder, ignore=shutil.ignore_patterns("__pycache__", "*.rejects.jsonl"))
    env = offline_env(tmp_path, ROCMFT_ROOT=str(clone), ROCMFT_VALIDATION_CACHE=str(tmp_path / "validated"))
    proc = subprocess.run([str(light_venv / "bin/rocmft"), "render", "tiny-cpu"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.startswith("tiny model: models/tiny-llama (built") and "validated  yes:" in out and "in image " in out
    mark = clone / "models" / "tiny-llama" / "rocmft-tiny.json"
    assert mark.is_file() and mark.stat().st_uid == os.getuid()
