"""Issue 32 item 4: a recipe, SET= or an imported command line cannot bind-mount any host path. Issue 43, N1: a
cache is a folder inside a per-image cache root, never a root itself, never through a link, never with a
character a runtime's mount syntax reads; an input never shows HF_HOME's token.

The plan (mounts) as data for a GPU host, the real socket, links and folders of this machine where the rule
looks at them, and the real CLI refusing `env.TRITON_CACHE_DIR=$HOME` before any daemon is asked. The same
attacks in a real container: tests/docker/test_container_security.py.
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


IMAGE_ROOT = f"{ROOT}/.cache/containers/rocmft_gfx942"  # the per-image cache root of rocmft:gfx942
SHOWN_ROOTS = f"{ROOT}/.cache/containers/rocmft_gfx942 or {ROOT}/.cache/tunableop/<image>"


def problems_for(overrides=(), args=None, caller=ALICE, image="rocmft:gfx942"):
    spec = rt.container_spec(plan_for("llama3-8b-lora", overrides), A["gfx942"], mi300x_node(), image=image,
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
    # issue 43, N1: the host's own caches and HF_HOME (its token) are no cache roots any more; a root is never whole
    (f"{ROOT}/.cache", "it is a cache root or holds one"),
    (f"{ROOT}/.cache/torch_extensions", "outside the caches a job may write"),  # what a RUNTIME=local run loads
    (f"{ROOT}/.cache/serve", "outside the caches a job may write"),  # the server's log, appended by the host
    ("/data/hf", "outside the caches a job may write"),
    ("/data/hf/modules", "outside the caches a job may write"),
    (f"{ROOT}/.cache/containers", "it is a cache root or holds one"),
    (f"{ROOT}/.cache/containers/rocmft_gfx1100/triton", "outside the caches a job may write"),  # another image's
])
def test_a_cache_variable_outside_the_caches_is_refused_one_line_each(path, why):
    [line] = problems_for([f"env.TRITON_CACHE_DIR={path}"])
    assert line.startswith(f"error: env.TRITON_CACHE_DIR: {path} is not mounted into a job: {why}"), line
    assert line.endswith(f"(use a folder inside {SHOWN_ROOTS}, or allow a root of yours: "
                         "export ROCMFT_CACHE_ROOTS=/path/to/caches)"), line


def test_caches_inside_the_images_own_root_or_an_allowed_root_are_mounted():
    assert problems_for([f"env.TRITON_CACHE_DIR={IMAGE_ROOT}/triton",
                         f"env.MIOPEN_USER_DB_PATH={ROOT}/.cache/tunableop/rocmft_gfx942/db"]) == []
    allowed = {**ALICE, "ROCMFT_CACHE_ROOTS": "/scratch/alice/cache:relative/ignored"}
    assert problems_for(["env.TRITON_CACHE_DIR=/scratch/alice/cache/triton"], caller=allowed) == []
    assert problems_for(["env.TRITON_CACHE_DIR=/scratch/alice/cache"], caller=allowed)  # the root itself: never
    # an allowed root that is itself a system location or your home allows nothing
    assert problems_for(["env.TRITON_CACHE_DIR=/home/alice/x"], caller={**ALICE, "ROCMFT_CACHE_ROOTS": "/home/alice"})
    # before the image is resolved (the draft spec, the pipeline's early check): inside any image's root
    assert problems_for([f"env.TRITON_CACHE_DIR={ROOT}/.cache/containers/rocmft_gfx1100/t"], image="") == []


def test_a_link_inside_an_allowed_root_is_never_followed(tmp_path):
    """The `or _inside(path, root)` branch of issue 32's rule, never tested: a symbolic link inside an allowed root
    passed the lexical check whatever it pointed at. Real links on this machine, as a job's earlier container
    (which writes its image's caches) could leave them: to your home, to the host's .cache, inside the root."""
    root = tmp_path / "project"
    image_root = root / ".cache" / "containers" / "rocmft_cpu"
    image_root.mkdir(parents=True)
    home = tmp_path / "home"
    (home / ".cache" / "huggingface").mkdir(parents=True)
    roots = mountable.cache_roots(str(root), {"HOME": str(home)}, "rocmft:cpu")
    (image_root / "to-home").symlink_to(home)
    (image_root / "to-hf").symlink_to(home / ".cache" / "huggingface")
    (image_root / "real").mkdir()
    (image_root / "real" / "nested").symlink_to(image_root / "real")  # even a link within the root
    (image_root / "a-file").write_text("not a folder")
    for name in ("to-home", "to-hf", "to-home/sub", "real/nested"):
        path = str(image_root / name)
        [problem] = mountable.cache_problems([("TRITON_CACHE_DIR", path)], roots, str(home))
        assert "is a symbolic link" in problem.message or "your home folder" in problem.message, (name, problem.line())
    [not_a_folder] = mountable.cache_problems([("TRITON_CACHE_DIR", str(image_root / "a-file"))], roots, str(home))
    assert "it is not a folder" in not_a_folder.message
    assert mountable.cache_problems([("TRITON_CACHE_DIR", str(image_root / "real" / "triton"))], roots, str(home)) == []


@pytest.mark.parametrize("path", [f"{ROOT}/.cache/containers/rocmft_gfx942/x,/home",
                                  f"{ROOT}/.cache/containers/rocmft_gfx942/x:/home:rw"])
def test_a_path_holding_a_runtimes_mount_separator_is_refused(path):
    """`,` splits Apptainer's --bind list (a second bind of /home), `:` Docker's source:target:mode (N7): refused
    where the pipeline judges a recipe for both runtimes, a cache and an input alike."""
    outside = path.replace(f"{ROOT}/.cache/containers/rocmft_gfx942", "/data/models")
    found = mountable.recipe_problems({"TRITON_CACHE_DIR": path}, {"model_name_or_path": outside}, ROOT, ALICE)
    assert [p.key for p in found] == ["env.TRITON_CACHE_DIR", "model_name_or_path"]
    assert all(": it holds `" in p.message and "which a runtime reads as a separator" in p.message for p in found)


@pytest.mark.parametrize("path,why", [
    ("/home/alice/.cache/huggingface", "is in ~/.cache, where HF_HOME keeps the Hub token"),
    ("/home/alice/.cache", "is in ~/.cache, where HF_HOME keeps the Hub token"),
    ("/data/hf", "is HF_HOME, inside it or above it"),
    ("/data", "is a system folder"),
    ("/data/hf/stored", "is HF_HOME, inside it or above it"),
])
def test_an_input_never_shows_hf_homes_token(path, why):
    [line] = problems_for(args={"model_name_or_path": path})
    assert f"model_name_or_path: {path} is not mounted into a job: " in line and why in line, line


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


def test_the_default_hugging_face_cache_is_mounted_as_the_hub_cache_and_as_an_input_never_as_a_cache():
    """Most users have no HF_HOME: ~/.cache/huggingface. Its hub cache comes with every job and a snapshot in it is a
    fine input; a cache variable in it is refused (issue 43, N1: caches live in per-image roots, and a container
    writing in HF_HOME sits beside the token), and so is the rest of ~/.cache."""
    caller = {"HOME": "/home/alice", "PATH": "/usr/bin"}  # no HF_HOME, no XDG_CACHE_HOME
    plan = plan_for("llama3-8b-lora", [], env=caller)
    host = mi300x_node(hf_home=DEFAULT_HF, hf_home_explicit=False)
    spec = rt.container_spec(plan, A["gfx942"], host, image="i", args={"model_name_or_path": SNAPSHOT})
    assert f"{DEFAULT_HF}/hub" in [m.source for m in spec.mounts]  # the snapshot comes with the hub cache
    assert [p.line() for p in rt.check_mounts(spec, caller) if "does not exist" not in p.message] == []
    # the same rules before launch (recipe_problems): the default HF home is found from HOME, as the host does
    assert mountable.recipe_problems({}, {"model_name_or_path": SNAPSHOT}, ROOT, caller) == []
    assert mountable.recipe_problems({}, {"model_name_or_path": f"{DEFAULT_HF}/datasets/x"}, ROOT, caller) == []
    [cache] = mountable.recipe_problems({"TRITON_CACHE_DIR": f"{DEFAULT_HF}/triton"}, {}, ROOT, caller)
    assert cache.key == "env.TRITON_CACHE_DIR" and "outside the caches a job may write" in cache.message
    # ... and HF_HOME itself, its token, the rest of ~/.cache and the dot-folders beside it still are refused
    for refused in (DEFAULT_HF, f"{DEFAULT_HF}/token", "/home/alice/.cache/pip", "/home/alice/.config/hf"):
        assert mountable.recipe_problems({}, {"model_name_or_path": refused}, ROOT, caller), refused


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
                      f"(use a folder inside {CHECKOUT}/.cache/containers/<image> or {CHECKOUT}/.cache/tunableop/<image>, "
                      "or allow a root of yours: export ROCMFT_CACHE_ROOTS=/path/to/caches)"], proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing committed
