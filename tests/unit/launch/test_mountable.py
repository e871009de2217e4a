"""Issue 32 item 4: a recipe, SET= or an imported command line cannot bind-mount any host path.

The plan (mounts) as data for a GPU host, the real socket and folders of this machine where the rule looks at
them, and the real CLI refusing `env.TRITON_CACHE_DIR=$HOME` before any daemon is asked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from rocmft.hardware import arches
from rocmft.launch import docker as rt
from rocmft.launch import mountable
from tests.conftest import ROOT as CHECKOUT
from tests.unit.launch.test_docker_spec import ROOT, mi300x_node, plan_for

A = arches.table()
ALICE = {"HOME": "/home/alice"}


def problems_for(overrides=(), args=None, caller=ALICE):
    spec = rt.container_spec(plan_for("llama3-8b-lora", overrides), A["gfx942"], mi300x_node(), image="i",
                             args=args or {})
    return [p.line() for p in rt.check_mounts(spec, caller) if "does not exist" not in p.message]


@pytest.mark.parametrize("path,why", [
    ("/home/alice", "/home/alice is your home folder"),
    ("/home", "/home is a system folder"),
    ("/", "/ is a system folder"),
    ("/etc/triton", "/etc/triton is a system location (/etc)"),
    ("/var/run", "/var/run is a system location (/var/run)"),
    ("/var/lib/docker/volumes/triton", "/var/lib/docker/volumes/triton is a system location (/var/lib)"),
    ("/home/alice/.ssh", "/home/alice/.ssh is in ~/.ssh, where credentials and settings live"),
    ("/home/alice/experiments/triton", "outside the caches a job may write"),
])
def test_a_cache_variable_outside_the_caches_is_refused_one_line_each(path, why):
    assert problems_for([f"env.TRITON_CACHE_DIR={path}"]) == [
        f"error: env.TRITON_CACHE_DIR: {path} is not mounted into a job: {why} (use a folder under "
        f"{ROOT}/.cache or /data/hf, or allow a root of yours: export ROCMFT_CACHE_ROOTS=/path/to/caches)"]


def test_caches_under_the_projects_caches_hf_home_or_an_allowed_root_are_mounted():
    assert problems_for([f"env.TRITON_CACHE_DIR={ROOT}/.cache/triton", "env.MIOPEN_USER_DB_PATH=/data/hf/miopen"]) == []
    allowed = {**ALICE, "ROCMFT_CACHE_ROOTS": "/scratch/alice/cache:relative/ignored"}
    assert problems_for(["env.TRITON_CACHE_DIR=/scratch/alice/cache/triton"], caller=allowed) == []
    # an allowed root that is itself a system location or your home allows nothing
    assert problems_for(["env.TRITON_CACHE_DIR=/home/alice/x"], caller={**ALICE, "ROCMFT_CACHE_ROOTS": "/home/alice"})


@pytest.mark.parametrize("key,path,why", [
    ("model_name_or_path", "/etc", "/etc is a system location (/etc)"),
    ("model_name_or_path", "/home/alice", "/home/alice is your home folder"),
    ("dataset_dir", "/home", "/home is a system folder"),
    ("adapter_name_or_path", "/home/alice/.aws/a", "/home/alice/.aws/a is in ~/.aws, where credentials and settings live"),
    ("model_name_or_path", "/proc/1/root", "/proc/1/root is a system location (/proc)"),
    ("model_name_or_path", "/var/lib/docker", "/var/lib/docker is a system location (/var/lib)"),
])
def test_an_input_in_a_system_location_or_your_home_is_refused(key, path, why):
    assert problems_for(args={key: path}) == [
        f"error: {key}: {path} is not mounted into a job: {why} (point it at the model or data folder itself)"]


# Most users set no HF_HOME: the Hugging Face cache is ~/.cache/huggingface (huggingface_hub's default), and the
# models they name are snapshots in it. Neither may be refused as a dot-folder of the home.
DEFAULT_HF = "/home/alice/.cache/huggingface"
SNAPSHOT = f"{DEFAULT_HF}/hub/models--meta-llama--Meta-Llama-3-8B-Instruct/snapshots/8afb486c"


def test_the_default_hugging_face_cache_is_mounted_as_a_cache_and_as_an_input():
    caller = {"HOME": "/home/alice", "PATH": "/usr/bin"}  # no HF_HOME, no XDG_CACHE_HOME
    plan = plan_for("llama3-8b-lora", [f"env.TRITON_CACHE_DIR={DEFAULT_HF}/triton"], env=caller)
    host = mi300x_node(hf_home=DEFAULT_HF, hf_home_explicit=False)
    spec = rt.container_spec(plan, A["gfx942"], host, image="i", args={"model_name_or_path": SNAPSHOT})
    assert f"{DEFAULT_HF}/hub" in [m.source for m in spec.mounts]  # the snapshot comes with the hub cache
    assert f"{DEFAULT_HF}/triton" in [m.source for m in spec.mounts if m.kind == "cache"]
    assert [p.line() for p in rt.check_mounts(spec, caller) if "does not exist" not in p.message] == []
    # the same rules before launch (recipe_problems): the default HF home is found from HOME, as the host does
    job_env = {"TRITON_CACHE_DIR": f"{DEFAULT_HF}/triton"}
    assert mountable.recipe_problems(job_env, {"model_name_or_path": SNAPSHOT}, ROOT, caller) == []
    # ... and the dot-folders beside it still are refused
    assert mountable.recipe_problems({}, {"model_name_or_path": "/home/alice/.config/hf"}, ROOT, caller)


def test_a_socket_is_never_mounted(tmp_path):
    sock_path = tmp_path / "docker.sock"  # what /var/run/docker.sock is: root on the host for whoever opens it
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert problems_for(args={"model_name_or_path": str(sock_path)}) == [
            f"error: model_name_or_path: {sock_path} is not mounted into a job: it is a socket "
            "(point it at the model or data folder itself)"]
        assert mountable.cache_problems([("TRITON_CACHE_DIR", str(sock_path))], [str(tmp_path)], "/home/alice")
    # a link to a system location is judged where it leads
    (tmp_path / "models").symlink_to("/etc")
    assert "system location (/etc)" in problems_for(args={"model_name_or_path": str(tmp_path / "models")})[0]


def test_make_train_refuses_triton_cache_dir_home_before_asking_the_daemon(tmp_path):
    """The real CLI, RUNTIME=docker, no daemon at all: the refusal is the only line, exit 2."""
    home = str(tmp_path / "home")
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env.update(HOME=home, DOCKER_HOST="unix:///nonexistent/docker.sock", ROCMFT_RUNS=str(tmp_path / "runs"),
               HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([sys.executable, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "docker",
                           f"--set=env.TRITON_CACHE_DIR={home}"], cwd=CHECKOUT, env=env, capture_output=True,
                          text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stderr
    assert errors == [f"error: env.TRITON_CACHE_DIR: {home} is not mounted into a job: {home} is your home folder "
                      f"(use a folder under {CHECKOUT}/.cache or {tmp_path}/hf, "
                      "or allow a root of yours: export ROCMFT_CACHE_ROOTS=/path/to/caches)"], proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing committed
