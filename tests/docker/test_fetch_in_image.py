"""`make fetch RUNTIME=docker`, for real in the CPU image, offline: huggingface_hub in the image resolves a repo
from the HF cache mounted at its own path (hit: exit 0 and the snapshot's path), or says in one line that it
is not there (miss: exit 2); the token is passed by name and never printed."""

from __future__ import annotations

import shutil

import pytest

from rocmft.image.docker_api import daemon_configured
from rocmft.io import hubcache
from tests.conftest import offline_env, rocmft

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cpu_image():
    if not daemon_configured():
        pytest.skip(reason="no Docker daemon configured (DOCKER_HOST unset and no /var/run/docker.sock)")
    from rocmft.image import find_image
    from rocmft.image.docker_api import connect

    image = find_image(connect(timeout=120), "cpu")
    if image is None:
        pytest.fail("no CPU image on the daemon: `make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1` first")
    return image


def test_fetch_in_the_image_offline_hit_and_miss(cpu_image, tmp_path, tiny_model):
    hf = tmp_path / "hf"
    commit = "c" * 40
    folder = hf / "hub" / hubcache.repo_folder("rocmft-test/tiny-llama")
    shutil.copytree(tiny_model, folder / "snapshots" / commit)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    env = {**offline_env(tmp_path), "HF_HOME": str(hf), "HF_TOKEN": "hf_secret_value"}
    hit = rocmft("fetch", "--model", "rocmft-test/tiny-llama", "--runtime", "docker", "--arch", "cpu", env=env, timeout=300)
    assert hit.returncode == 0, hit.stderr
    assert f"fetched model `rocmft-test/tiny-llama` -> {folder / 'snapshots' / commit}" in hit.stdout
    miss = rocmft("fetch", "--model", "rocmft-test/absent", "--runtime", "docker", "--arch", "cpu", env=env, timeout=300)
    assert miss.returncode == 2 and "`rocmft-test/absent` is not in the Hugging Face cache" in miss.stderr
    assert "hf_secret_value" not in hit.stdout + hit.stderr + miss.stdout + miss.stderr


def test_fetch_tasks_in_the_image_offline_the_shipped_local_task_and_an_unknown_name(cpu_image, tmp_path):
    """`make fetch TASKS= RUNTIME=docker`: the image's lm_eval finds the project's task folder (the checkout is
    mounted at its own path) and writes the datasets cache into the HF_HOME mounted at its own path."""
    env = {**offline_env(tmp_path), "HF_HOME": str(tmp_path / "hf")}
    proc = rocmft("fetch", "--tasks", "rocmft_demo", "--runtime", "docker", "--arch", "cpu", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"fetched task `rocmft_demo` (2 tasks, json) -> {tmp_path / 'hf' / 'datasets'}" in proc.stdout
    assert list((tmp_path / "hf" / "datasets").glob("json/*"))
    unknown = rocmft("fetch", "--tasks", "rocmft_dem", "--runtime", "docker", "--arch", "cpu", env=env, timeout=600)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines()[-1].startswith(
        "error: TASKS: `rocmft_dem` is not an lm-evaluation-harness task or group (the harness's closest: "
        "rocmft_demo"), unknown.stderr[-2000:]
