"""RUNTIME=docker for real: the tiny model trained inside the CPU image by a real Docker daemon.

Needs a daemon (DOCKER_HOST, e.g. from `eval "$(scripts/ci/dockerd-up.sh)"`, or /var/run/docker.sock) and
the CPU image (`make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1`). Skipped only when no daemon
is configured at all; a configured daemon without the image FAILS (CI must build it first).

- `make train RECIPE=tiny-cpu RUNTIME=docker ARCH=cpu SET=max_steps=2`: 1 process; the adapter and the venv
  run's first two losses read on the host side of the mount; no secret written; the container removed.
- 2 processes under torchrun, launched by a NON-ROOT user: run as root (CI), the launcher runs under
  `setpriv --reuid` as uid 1000 (ROCMFT_TEST_UID) with the docker socket's group (a user in the `docker`
  group); run as a user, as that user. On a copy of the project that user owns, every file the container
  wrote must belong to that uid, not root.
- Ctrl-C (SIGINT) and SIGTERM (what a scheduler or `kill` sends) to the launcher while the job trains: the
  container is stopped (by the SIGTERM `docker stop` sends, not the SIGKILL after its timeout) and removed,
  the launcher exits 128+N and the run is marked interrupted with the signal's name.
- A launcher killed with SIGKILL leaves its container running: `rocmft runs` reports it with `docker rm -f`.
- Bad input: unreachable daemon, an image without the arch label, a GPU recipe on a host without GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import contextlib
import sys
import uuid
from pathlib import Path

import pytest

from rocmft.image.docker_api import daemon_configured
from tests.conftest import PYTHON, ROOT, offline_env, rocmft, wait_until

pytestmark = pytest.mark.docker
SECRET = "hf_docker_test_SECRET_value"
TEST_UID = int(os.environ.get("ROCMFT_TEST_UID", "1000"))


@pytest.fixture(scope="module")
def client():
    if not daemon_configured():
        pytest.skip(reason="no Docker daemon configured (DOCKER_HOST unset and no /var/run/docker.sock); "
                    "in CI: eval \"$(scripts/ci/dockerd-up.sh)\"")
    from rocmft.io.problems import ProblemReport
    from rocmft.launch.docker import connect

    try:
        return connect(timeout=120)
    except ProblemReport as exc:
        pytest.fail(f"a Docker daemon is configured but not usable: {exc}")


@pytest.fixture(scope="module")
def cpu_image(client):
    from rocmft.image import find_image, image_arch, tags

    image = find_image(client, "cpu")
    if image is None:
        pytest.fail(f"no CPU image ({', '.join(tags('cpu'))}) on the daemon: build it first with "
                    "`make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1`")
    assert image_arch(image) == "cpu"
    return image


def containers_of(client, run_dir: Path) -> list:
    # ignore_removed: the SDK inspects each listed container, and one removed in between is no error here
    return client.containers.list(all=True, ignore_removed=True, filters={"label": f"ai.rocmft.run={run_dir}"})


def losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "output" / "trainer_log.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if "loss" in json.loads(line)]


def configured_steps(run_dir: Path) -> int:
    """The losses a run logs: its max_steps over logging_steps, as LLaMA-Factory read them."""
    import yaml

    train = yaml.safe_load((run_dir / "train.yaml").read_text())
    return train["max_steps"] // train.get("logging_steps", 1)


def no_secret_written(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert SECRET.encode() not in path.read_bytes(), f"the secret was written to {path}"


def test_make_train_tiny_cpu_in_container_1_process(client, cpu_image, tiny_model, tmp_path, trained_run):
    """Two steps in the image train the venv's numbers: the session's tiny-cpu run (same seed, data and pinned
    stack) logged the same first two losses. Step 2's loss follows step 1's update at the base learning rate
    (cosine, no warmup), whatever max_steps is: that the loss falls over a whole run is the venv's run's."""
    env = offline_env(tmp_path, HF_TOKEN=SECRET)
    started = time.monotonic()
    name = f"docker-1p-{uuid.uuid4().hex[:6]}"  # the container is rocmft-<run name>: unique on a shared daemon
    out = subprocess.run(["make", "train", "RECIPE=tiny-cpu", "RUNTIME=docker", "ARCH=cpu", f"RUN_NAME={name}",
                          "SET=max_steps=2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    run_dir = tmp_path / "runs" / name
    # read on the host side of the mount
    assert (run_dir / "output" / "adapter_model.safetensors").stat().st_size > 0
    loss = losses(run_dir)
    assert len(loss) == configured_steps(run_dir) == 2, loss
    assert loss == pytest.approx(trained_run.losses()[:2], rel=1e-4), (loss, trained_run.losses()[:2])
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "succeeded" and status["runtime"] == "docker" and status["exit_code"] == 0
    spec = json.loads((run_dir / "container.json").read_text())
    assert spec["command"][:4] == ["python", "-u", "-m", "rocmft.worker"] and spec["secret_env"] == ["HF_TOKEN"]
    assert spec["devices"] == [] and spec["shm_size"] == "2g" and spec["init"] is True
    versions = json.loads((run_dir / "versions.json").read_text())
    assert versions["image"] == cpu_image.id and versions["image_labels"]["ai.rocmft.arch"] == "cpu"
    assert "[rocmft] loss" in out.stdout  # the live progress display
    assert "{'loss'" in (run_dir / "train.log").read_text()
    no_secret_written(run_dir)
    assert containers_of(client, run_dir) == []  # removed at the end
    print(f"1-process container training: {elapsed:.1f} s")


def _socket_gid() -> int | None:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        try:
            return os.stat(host[len("unix://"):]).st_gid
        except OSError:
            return None
    return None


def launching_uid() -> int:
    """Who launches the non-root run: TEST_UID switched to with setpriv when the tests run as root (CI), else
    the user running the tests themselves (already not root)."""
    return TEST_UID if os.getuid() == 0 else os.getuid()


@contextlib.contextmanager
def passable_to_others(*paths: Path):
    """As root in a private clone (a 0700 folder of root's), the switched-to uid cannot reach this checkout's venv
    and src: each folder above them that others cannot pass through gets o+x (pass, not list) for the test only,
    and its mode back after. A user running the tests as themselves never needs it (no switch)."""
    changed: list[tuple[Path, int]] = []
    folders = {a for p in paths for a in (Path(os.path.realpath(p)), *Path(os.path.realpath(p)).parents)}
    try:
        for folder in sorted(folders, key=lambda f: len(f.parts)):
            mode = folder.stat().st_mode & 0o7777
            if os.getuid() == 0 and not mode & 0o001:
                changed.append((folder, mode))
                os.chmod(folder, mode | 0o001)
        yield
    finally:
        for folder, mode in reversed(changed):
            os.chmod(folder, mode)


@pytest.fixture
def user_project(tiny_model):
    """A copy of the project owned by the launching user (pytest's tmp dirs are 0700 root: not reachable by it)."""
    if os.getuid() == 0 and not shutil.which("setpriv"):
        pytest.fail("setpriv (util-linux) is missing")
    base = Path(tempfile.mkdtemp(prefix="rocmft-user-"))
    os.chmod(base, 0o755)
    project = base / "project"
    shutil.copytree(ROOT, project, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", ".cache", "wheelhouse", "build", "__pycache__", "*.egg-info", ".pytest_cache", "results"))
    if os.getuid() == 0:
        for path in [project, *project.rglob("*")]:
            os.lchown(path, TEST_UID, TEST_UID)
    yield project
    shutil.rmtree(base, ignore_errors=True)


def test_train_2_processes_as_non_root_user_files_not_root_owned(client, cpu_image, user_project):
    project = user_project
    env = offline_env(project, HF_TOKEN=SECRET, ROCMFT_ROOT=str(project), HOME=str(project / ".home"),
                      HF_HOME=str(project / ".cache" / "hf"), MPLCONFIGDIR=str(project / ".cache" / "matplotlib"),
                      TORCH_EXTENSIONS_DIR=str(project / ".cache" / "torch_extensions"),
                      ROCMFT_VALIDATION_CACHE=str(project / ".cache" / "validated"))  # the session's is root's
    env.pop("ROCMFT_RUNS")  # runs/ inside the user's project
    name = f"docker-2p-{uuid.uuid4().hex[:6]}"
    uid = launching_uid()
    gid = _socket_gid()
    groups = ["--groups", str(gid)] if gid is not None else ["--clear-groups"]
    switch = ["setpriv", f"--reuid={uid}", f"--regid={uid}", *groups] if os.getuid() == 0 else []
    cmd = [*switch, PYTHON, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "docker", "--run-name", name,
           "--set", "gpus_per_node=2 max_steps=2 save_steps=1"]  # two saved steps: that a container run learns
    # is test_make_train_tiny_cpu_in_container_1_process's (the venv's losses); this one: two ranks, who owns the files
    started = time.monotonic()
    with passable_to_others(Path(PYTHON).parent.parent / "lib", ROOT / "src", Path(sys.base_prefix) / "bin"):
        out = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    run_dir = project / "runs" / name
    assert (run_dir / "output" / "adapter_model.safetensors").is_file()
    loss = losses(run_dir)
    assert len(loss) == configured_steps(run_dir) == 2 and all(0 < x < 20 for x in loss), loss
    assert sorted(p.name for p in (run_dir / "output").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["nproc_per_node"] == 2 and "torch.distributed.run" in plan["argv"]
    spec = json.loads((run_dir / "container.json").read_text())
    assert spec["user"] == f"{uid}:{os.getgid() if os.getuid() else uid}"
    owners = {(p.relative_to(project), p.lstat().st_uid) for p in run_dir.rglob("*")}
    root_owned = sorted(str(p) for p, owner in owners if owner != uid)
    assert not root_owned, f"files not owned by uid {uid}: {root_owned[:10]}"
    assert len(owners) > 10  # adapter, checkpoints, logs: the container wrote them as the user
    no_secret_written(run_dir)
    assert containers_of(client, run_dir) == []
    print(f"2-process container training as uid {uid}: {elapsed:.1f} s")


def _start_launcher(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path, Path]:
    name = f"{name}-{uuid.uuid4().hex[:6]}"  # the container is rocmft-<run name>: unique on a shared daemon
    env = offline_env(tmp_path)
    log = tmp_path / f"{name}.out"
    # a job that cannot end on its own before the test acts on it: 200 steps took ~10 s in the CPU image, and
    # a CI run once saw that container gone before its first poll saw it train; the test's finally removes it
    proc = subprocess.Popen([PYTHON, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "docker",
                             "--run-name", name, "--set", "max_steps=100000 save_steps=100000"],
                            cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    return proc, tmp_path / "runs" / name, log


def _wait_training(client, proc, run_dir: Path, log: Path, timeout: float = 600) -> None:
    """Until the container runs and the job has logged its first step (progress.jsonl on the mount)."""
    from rocmft.run import events

    def training() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        found = containers_of(client, run_dir)
        if not found and events.steps(events.read(run_dir)):  # it trained, then its container went: say why
            wait_until(lambda: proc.poll() is not None, timeout=60, what="the launcher ending after its container")
            raise AssertionError(f"the container ended before the signal:\n{log.read_text()[-3000:]}")
        return bool(found) and found[0].status == "running" and bool(events.steps(events.read(run_dir)))

    try:
        wait_until(training, timeout=timeout, what="the container training")
    except AssertionError:
        proc.kill()
        raise


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_to_the_launcher_stops_and_removes_the_container(client, cpu_image, tiny_model, tmp_path, sig):
    proc, run_dir, log = _start_launcher(tmp_path, f"docker-{sig.name.lower()}")
    try:
        _wait_training(client, proc, run_dir, log)
        container = containers_of(client, run_dir)[0]
        since = int(time.time()) - 1
        proc.send_signal(sig)
        code = proc.wait(timeout=180)
        wait_until(lambda: not containers_of(client, run_dir), timeout=120, what="the container removed")
        died = list(client.events(since=since, until=int(time.time()) + 1, decode=True,
                                  filters={"type": "container", "event": "die", "container": container.id}))
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in containers_of(client, run_dir):
            c.remove(force=True)
    assert code == 128 + sig, log.read_text()[-3000:]
    # `docker stop` sends SIGTERM, then SIGKILL after run.STOP_TIMEOUT_S: 137 would mean the job ignored SIGTERM
    assert [e["Actor"]["Attributes"]["exitCode"] for e in died] != ["137"], died
    assert len(died) == 1
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "interrupted" and status["signal"] == sig.name
    out = log.read_text()
    assert f"[rocmft] {sig.name}: the job finishes its optimizer step" in out and f"[rocmft] interrupted by {sig.name}" in out
    assert sig.name == "SIGTERM" or "SIGTERM" not in out, out[-3000:]  # docker stop's SIGTERM is the job's, not said


def test_make_runs_reports_container_of_a_crashed_launcher(client, cpu_image, tiny_model, tmp_path):
    proc, run_dir, log = _start_launcher(tmp_path, "docker-orphan")
    try:
        _wait_training(client, proc, run_dir, log)
        proc.kill()  # the launcher crashes: nobody stops the container
        proc.wait(timeout=10)
        assert [c.status for c in containers_of(client, run_dir)] == ["running"]
        out = rocmft("runs", env=offline_env(tmp_path), timeout=120)
        assert out.returncode == 0, out.stderr
        assert "Containers left by a crashed launcher" in out.stdout
        assert f"docker rm -f rocmft-{run_dir.name}" in out.stdout
        row = next(line for line in out.stdout.splitlines() if line.startswith(run_dir.name))
        assert "interrupted" in row and "launcher gone" in row
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in containers_of(client, run_dir):
            c.remove(force=True)


def test_unreachable_daemon_is_a_clear_message_before_any_run_dir(tiny_model, tmp_path):
    env = offline_env(tmp_path, DOCKER_HOST=f"unix://{tmp_path}/nothing.sock")
    out = rocmft("train", "tiny-cpu", "--runtime", "docker", env=env, timeout=300)
    assert out.returncode == 2
    assert "cannot reach the Docker daemon" in out.stderr and "RUNTIME=local" in out.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_image_without_arch_label_is_refused(client, cpu_image, tiny_model, tmp_path):
    from rocmft.hardware import arches
    from rocmft.image.docker_api import get_image

    base = arches.table()["cpu"].base_image
    if get_image(client, base) is None:
        pytest.skip(reason=f"{base} (the unlabelled base image) is not on this daemon")
    out = rocmft("train", "tiny-cpu", "--runtime", "docker", "--docker-image", base, env=offline_env(tmp_path), timeout=300)
    assert out.returncode == 2 and "no ai.rocmft.arch label" in out.stderr, out.stderr


def test_an_image_labelled_for_another_arch_is_refused_before_any_run_dir(client, tiny_model, tmp_path):
    """The daemon's own labels, not a fake's: an image built FROM the local base with ai.rocmft.arch=gfx1100
    (no pull: the base is on the daemon, CI's scripts/ci/build-cpu-base.sh) handed to a cpu recipe."""
    import io

    from rocmft.hardware import arches
    from rocmft.image.docker_api import get_image

    base = arches.table()["cpu"].base_image
    if get_image(client, base) is None:
        pytest.fail(f"{base} is not on this daemon: in CI bash scripts/ci/build-cpu-base.sh makes it")
    tag = f"rocmft-test-other-arch:{uuid.uuid4().hex[:8]}"
    client.images.build(fileobj=io.BytesIO(f"FROM {base}\n".encode()), tag=tag, labels={"ai.rocmft.arch": "gfx1100"},
                        pull=False, rm=True, network_mode="none")
    try:
        env = offline_env(tmp_path)
        out = rocmft("train", "tiny-cpu", "--runtime", "docker", "--docker-image", tag, env=env, timeout=300)
        assert out.returncode == 2 and "is built for gfx1100" in out.stderr, out.stderr
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    finally:
        client.images.remove(tag, force=True)


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this host has an AMD GPU driver")
def test_gpu_recipe_on_a_host_without_gpu(client, tmp_path):
    out = rocmft("train", "llama3-8b-z3", "--runtime", "docker", "--no-plan", env=offline_env(tmp_path), timeout=300)
    assert out.returncode == 2 and "no AMD GPU found on this host" in out.stderr, out.stderr
    assert "make demo" in out.stderr


def test_make_shell_runs_a_command_in_the_image(client, cpu_image, tmp_path):
    out = subprocess.run([PYTHON, "-m", "rocmft.cli.main", "shell", "--arch", "cpu", "--", "sh", "-c",
                          "id -u; pwd; echo $HOME; python -c 'import rocmft, llamafactory; print(\"ok\")'"],
                         cwd=ROOT, env=offline_env(tmp_path), capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split()
    assert lines[:3] == [str(os.getuid()), str(ROOT), "/tmp"] and lines[-1] == "ok"  # HOME: the container's own
