"""The SDK driver (launch/docker/run.py) against the real daemon, where the unit tests once had a fake one.

- A container the daemon cannot start (a device this host lacks): exit 125, the daemon's own reason, the
  container removed.
- A name already taken: `rocmft train --runtime docker` refuses before any run dir exists (exit 2, how to
  remove it); the driver itself, created past that check, gets the daemon's 409: exit 125, the run never
  marked running, the other container untouched.
- SIGTERM (and Ctrl-C) to the launcher while a real training runs: tests/docker/test_container_train.py.

Containers made here are named rocmft-test-*-<random> and carry this test's tmp path as a label, so they
cannot clash with anyone else's on a shared daemon and the run's end-of-session check knows them.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from rocmft.launch import docker as rt
from rocmft.run import runs
from tests.conftest import offline_env, rocmft
from tests.docker.test_container_train import client, cpu_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def unique(what: str) -> str:
    return f"test-{what}-{uuid.uuid4().hex[:8]}"


def spec(image_id: str, run_dir: Path, name: str, **changes) -> rt.ContainerSpec:
    """The smallest real spec: the CPU image, a command that would run for minutes if it started."""
    base = rt.ContainerSpec(image=image_id, command=("sh", "-c", "echo started; sleep 600"), name=name,
                            environment={}, secret_env=(), devices=(), group_add=(), ipc_mode=None, shm_size=None,
                            cap_add=(), ulimits=(), mounts=(), working_dir="/",
                            user=f"{os.getuid()}:{os.getgid()}", labels={"ai.rocmft.run": str(run_dir)})
    return replace(base, **changes)


def named(client, name: str) -> list:  # noqa: F811
    return [c for c in client.containers.list(all=True, ignore_removed=True, filters={"name": name}) if c.name == name]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    path = tmp_path / "runs" / "x"
    path.mkdir(parents=True)
    return path


def test_a_container_the_daemon_cannot_start_is_exit_125_with_its_reason(client, cpu_image, run_dir,  # noqa: F811
                                                                         tmp_path, capsys):
    name = f"rocmft-{unique('nostart')}"
    missing = str(tmp_path / "no-such-device")  # like /dev/kfd on a host without the amdgpu driver
    try:
        assert rt.run_container(client, spec(cpu_image.id, run_dir, name, devices=(missing,)), run_dir, quiet=True) == 125
        out = capsys.readouterr().out
        assert "[rocmft] the container did not start: error gathering device information" in out
        assert missing in out
        assert named(client, name) == []  # created, refused at start, removed
        assert runs.read_status(run_dir)["container"] == name  # the run says which container it was
    finally:
        for container in named(client, name):
            container.remove(force=True)


def test_a_taken_name_is_the_daemons_409_and_the_other_container_untouched(client, cpu_image, run_dir,  # noqa: F811
                                                                           capsys):
    name = f"rocmft-{unique('taken')}"
    blocker = client.containers.create(cpu_image.id, command=["sleep", "600"], name=name,
                                       labels={"ai.rocmft.run": str(run_dir)})
    try:
        assert rt.run_container(client, spec(cpu_image.id, run_dir, name), run_dir, quiet=True) == 125
        out = capsys.readouterr().out
        assert f'[rocmft] the daemon refused to create the container: Conflict. The container name "/{name}"' in out
        assert runs.read_status(run_dir) == {}  # never marked running
        blocker.reload()
        assert blocker.status == "created" and [c.id for c in named(client, name)] == [blocker.id]
    finally:
        blocker.remove(force=True)


def test_train_refuses_a_run_whose_container_name_is_taken_before_any_run_dir(client, cpu_image, tiny_model,  # noqa: F811
                                                                              tmp_path):
    run_name = unique("clash")
    blocker = client.containers.create(cpu_image.id, command=["sleep", "600"], name=f"rocmft-{run_name}",
                                       labels={"ai.rocmft.run": str(tmp_path)})
    try:
        proc = rocmft("train", "tiny-cpu", "--runtime", "docker", "--run-name", run_name, env=offline_env(tmp_path))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"a container named rocmft-{run_name} already exists" in proc.stderr
        assert f"docker rm -f rocmft-{run_name}" in proc.stderr
        assert not (tmp_path / "runs" / run_name).exists()
        blocker.reload()
        assert blocker.status == "created"
    finally:
        blocker.remove(force=True)
