"""Validation where the job runs, for real: RUNTIME=docker judges the rendered files inside the CPU image,
launched from a light host install (no torch, no LLaMA-Factory on the host side).

- a recipe with a typo is refused before any training container exists: the key named, exit 2;
- the same recipe without the typo is validated in the image (the daemon's events show a validation
  container of that image started; the run records `validated_in` = that image, not a cached verdict), then
  trains in the container;
- the validation container is gone afterwards.

The session's validation cache is empty (tests/conftest.py), so no verdict of an earlier run stands in.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from rocmft.image.docker_api import daemon_configured
from tests.conftest import ROOT, offline_env

pytestmark = pytest.mark.docker
OURS = ["ai.rocmft.role=validate", f"ai.rocmft.project={ROOT}"]  # this checkout's (others share the daemon)


@pytest.fixture(scope="module")
def client():
    if not daemon_configured():
        pytest.skip(reason="no Docker daemon configured (DOCKER_HOST unset and no /var/run/docker.sock)")
    from rocmft.image.docker_api import connect

    return connect(timeout=120)


@pytest.fixture(scope="module")
def cpu_image(client):
    from rocmft.image import find_image

    image = find_image(client, "cpu")
    if image is None:
        pytest.fail("no CPU image on the daemon: `make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1` first")
    return image


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    """The light host, made by the script `make host` runs, in a venv of its own."""
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run(["bash", "scripts/host-venv.sh"], cwd=ROOT, env={**offline_env(venv.parent), "VENV": str(venv)},
                   check=True, timeout=600)
    probe = subprocess.run([str(venv / "bin/python"), "-c", "import torch"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    return venv


def training_containers(client) -> list:
    return [c for c in client.containers.list(all=True, ignore_removed=True) if "ai.rocmft.run" in (c.labels or {})]


def light_train(venv: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin/rocmft"), "train", "tiny-cpu", "--runtime", "docker", "--no-plan", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_bad_recipe_refused_in_image_before_any_training_container(client, cpu_image, light_venv, tiny_model, tmp_path):
    before = {c.id for c in training_containers(client)}
    env = offline_env(tmp_path)
    proc = light_train(light_venv, env, "llamafactory.lora_rankk=8")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "lora_rankk: unknown to LLaMA-Factory" in out and "did you mean `lora_rank`?" in out, out
    assert {c.id for c in training_containers(client)} == before  # nothing launched
    assert not client.containers.list(all=True, ignore_removed=True, filters={"label": OURS})  # removed
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run dir either


def validation_starts(client, since: int, until: int) -> list[dict]:
    """The daemon's own record of validation containers started in [since, until]."""
    return list(client.events(since=since, until=until, decode=True,
                              filters={"type": "container", "event": "start", "label": OURS}))


def test_good_recipe_validated_in_image_then_trains(client, cpu_image, light_venv, tiny_model, tmp_path):
    # a cache of its own: another test of the session may have validated the same files in the same image
    env = offline_env(tmp_path, ROCMFT_VALIDATION_CACHE=str(tmp_path / "validated"))
    since = int(time.time()) - 1
    proc = light_train(light_venv, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    assert (run_dir / "output" / "adapter_model.safetensors").is_file()
    started = validation_starts(client, since, int(time.time()) + 1)
    assert [e["Actor"]["Attributes"]["image"] for e in started] == [cpu_image.id], started
    status = json.loads((run_dir / "status.json").read_text())
    assert status["validated_in"].startswith("image ") and cpu_image.id.split(":")[-1][:12] in status["validated_in"]
    assert "cached" not in status["validated_in"]
    assert not client.containers.list(all=True, ignore_removed=True, filters={"label": OURS})
