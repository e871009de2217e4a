"""RUNTIME=docker for chat/serve/webui as data (no daemon here): the training container of the arch
(launch/docker's spec: devices, groups, mounts, user) running LLaMA-Factory, its port published on the
asked host address only, API_KEY passed by name and never written."""

from __future__ import annotations

from rocmft import arches
from rocmft.serve import docker, plan, target
from tests.unit.launch.test_docker_spec import ROOT, laptop, mi300x_node
from tests.unit.serve.conftest import make_run

A = arches.table()
KEY = "sk-test-SECRET-456"
CALLER = {"HF_HOME": "/data/hf", "API_KEY": KEY, "PATH": "/usr/bin"}


def test_api_on_gfx942_gets_the_gpus_and_publishes_only_on_loopback(runs_dir):
    t = target.load(make_run(runs_dir, "r1", arch="gfx942", runtime="docker"))
    api = plan.api(t, {"max_new_tokens": 64}, "docker", "127.0.0.1", 8000, CALLER)
    spec, ports = docker.container(api, A["gfx942"], mi300x_node(runs_dir=str(runs_dir)), image="rocmft:gfx942",
                                   caller_env=CALLER, launcher_pid=4242)
    assert ports == {"8000/tcp": ("127.0.0.1", 8000)}
    assert spec.command[:2] == ("llamafactory-cli", "api") and "--max_new_tokens" in spec.command
    assert spec.devices == ("/dev/kfd", "/dev/dri") and spec.group_add == ("44", "109")
    assert spec.ipc_mode == "host" and spec.security_opt == ("seccomp=unconfined",)
    assert spec.environment["API_HOST"] == "0.0.0.0" and spec.environment["API_PORT"] == "8000"
    assert spec.secret_env == ("API_KEY",) and "API_KEY" not in spec.environment
    assert KEY not in spec.to_json()
    assert spec.user == "1000:1000" and spec.working_dir == ROOT
    assert spec.labels["ai.rocmft.serve"] == "api" and "ai.rocmft.shell" not in spec.labels
    assert spec.name == "rocmft-api-r1-4242"
    argv = docker.docker_argv(spec, ports)
    at = argv.index("rocmft:gfx942")
    assert argv[at - 1] == "--publish=127.0.0.1:8000:8000" and argv[at + 1:] == list(spec.command)
    assert "--env=API_KEY" in argv and not any(KEY in a for a in argv)


def test_chat_on_gfx942_with_two_gpus_and_a_run_dir_outside_the_project(runs_dir):
    t = target.load(make_run(runs_dir, "r1", arch="gfx942", runtime="docker"))
    repl = plan.chat(t, {}, "docker")
    facts = mi300x_node(runs_dir="/scratch/runs")
    spec, ports = docker.container(repl, A["gfx942"], facts, image="rocmft:gfx942", caller_env={}, gpus=("2", "3"))
    assert ports == {} and spec.interactive
    assert spec.devices == ("/dev/kfd", "/dev/dri/renderD130", "/dev/dri/renderD131")
    assert any(m.source == "/scratch/runs" for m in spec.mounts)  # ROCMFT_RUNS outside the project
    assert any(m.source == str(runs_dir / "r1" / "output") and m.read_only for m in spec.mounts)  # the adapter


def test_cpu_container_drops_the_one_thread_per_rank_setting(runs_dir):
    t = target.load(make_run(runs_dir, "r1"))
    one = plan.chat(t, {}, "docker", prompt="hi")
    spec, _ = docker.container(one, A["cpu"], laptop(runs_dir=str(runs_dir)), image="rocmft:cpu", caller_env={})
    assert spec.devices == () and spec.shm_size == "2g"
    assert "OMP_NUM_THREADS" not in spec.environment and spec.environment["DS_ACCELERATOR"] == "cpu"
    assert spec.command[:3] == ("python", "-m", "rocmft.serve.ask")


def test_webui_container_publishes_gradio_and_mounts_the_hf_cache():
    ui = plan.webui("gfx1100", "docker", "127.0.0.1", 7860)
    facts = mi300x_node(hf_home="/data/hf")
    spec, ports = docker.container(ui, A["gfx1100"], facts, image="rocmft:gfx1100", caller_env={"HF_HOME": "/data/hf"})
    assert ports == {"7860/tcp": ("127.0.0.1", 7860)}
    assert spec.command == ("llamafactory-cli", "webui") and spec.environment["GRADIO_SERVER_NAME"] == "0.0.0.0"
    assert any(m.source == "/data/hf" for m in spec.mounts) and spec.environment["HF_HOME"] == "/data/hf"
    assert any(m.source == ROOT for m in spec.mounts)


def test_localhost_is_published_as_an_address():
    ui = plan.webui("cpu", "docker", "localhost", 7860)
    _, ports = docker.container(ui, A["cpu"], laptop(), image="rocmft:cpu", caller_env={})
    assert ports == {"7860/tcp": ("127.0.0.1", 7860)}
