"""RUNTIME=docker for chat/serve/webui as data (no daemon here): the training container of the arch
(launch/docker's spec: devices, groups, user) running LLaMA-Factory; a server on the host's network bound
to the asked host (no bridge address), no host IPC, the checkout read-only; API_KEY (the server's key, set from
ROCMFT_API_KEY by cli/serve.py) by name, never written."""

from __future__ import annotations

from rocmft.hardware import arches
from rocmft.launch import docker as rt
from rocmft.run import target
from rocmft.serve import docker, plan
from tests.unit.launch.test_docker_spec import ROOT, laptop, mi300x_node
from tests.unit.run.conftest import make_run

A = arches.table()
KEY = "sk-test-SECRET-456"
CALLER = {"HF_HOME": "/data/hf", "API_KEY": KEY, "PATH": "/usr/bin"}


def writable(spec) -> set[str]:
    return {m.source for m in spec.mounts if not m.read_only}


def test_api_on_gfx942_binds_the_host_on_the_hosts_network(runs_dir):
    t = target.load(make_run(runs_dir, "r1", arch="gfx942", runtime="docker"))
    api = plan.api(t, {"max_new_tokens": 64}, "docker", "127.0.0.1", 8000)
    spec = docker.container(api, A["gfx942"], mi300x_node(runs_dir=str(runs_dir)), image="rocmft:gfx942",
                            caller_env=CALLER, launcher_pid=4242)
    assert spec.network_mode == "host" and spec.environment["API_HOST"] == "127.0.0.1"
    assert spec.command[:3] == ("python", "-m", "rocmft.serve.api") and "--max_new_tokens" in spec.command
    assert spec.environment["PYTHONPATH"] == "src"
    assert spec.devices == ("/dev/kfd", *(f"/dev/dri/renderD{128 + i}" for i in range(8)))  # the gfx942 GPUs
    assert spec.group_add == ("44", "109")
    # a server: no host IPC; Docker's seccomp profile with the NUMA calls ROCr needs (CAP_SYS_NICE)
    assert spec.ipc_mode is None and spec.shm_size == "2g" and spec.cap_add == ("SYS_NICE",)
    assert spec.secret_env == ("API_KEY", "ROCMFT_READY_SECRET") and "API_KEY" not in spec.environment
    assert KEY not in spec.to_json()
    assert spec.user == "1000:1000" and spec.working_dir == ROOT
    assert [m.read_only for m in spec.mounts if m.source == ROOT] == [True]
    assert writable(spec) == {"/data/hf/hub", "/data/hf/datasets", f"{ROOT}/.cache/containers/rocmft_gfx942"}
    assert spec.labels["ai.rocmft.serve"] == "api" and "ai.rocmft.shell" not in spec.labels
    assert spec.name == "rocmft-api-r1-4242"
    argv = rt.docker_run_argv(spec)
    assert "--network=host" in argv and not any(a.startswith("--publish") for a in argv)
    assert "--env=API_KEY" in argv and not any(KEY in a for a in argv)
    assert "--cap-add=SYS_NICE" in argv and not any("seccomp" in a or "--ipc" in a for a in argv)
    kwargs = rt.sdk_kwargs(spec, CALLER)
    assert kwargs["network_mode"] == "host" and "ports" not in kwargs and kwargs["environment"]["API_KEY"] == KEY


def test_chat_on_gfx942_with_two_gpus_and_a_run_dir_outside_the_project(runs_dir):
    t = target.load(make_run(runs_dir, "r1", arch="gfx942", runtime="docker"))
    repl = plan.chat(t, {}, "docker")
    facts = mi300x_node(runs_dir="/scratch/runs")
    spec = docker.container(repl, A["gfx942"], facts, image="rocmft:gfx942", caller_env={}, gpus=("2", "3"))
    assert spec.interactive and spec.network_mode is None  # listens nowhere: Docker's bridge
    assert spec.devices == ("/dev/kfd", "/dev/dri/renderD130", "/dev/dri/renderD131")
    assert any(m.source == "/scratch/runs" for m in spec.mounts)  # ROCMFT_RUNS outside the project
    assert any(m.source == str(runs_dir / "r1" / "output") and m.read_only for m in spec.mounts)  # the adapter


def test_cpu_container_drops_the_one_thread_per_rank_setting(runs_dir):
    t = target.load(make_run(runs_dir, "r1"))
    one = plan.chat(t, {}, "docker", prompt_file=f"{ROOT}/.cache/serve/in-x/text")
    spec = docker.container(one, A["cpu"], laptop(runs_dir=str(runs_dir)), image="rocmft:cpu", caller_env={})
    assert spec.devices == () and spec.shm_size == "2g" and spec.cap_add == ()
    assert "OMP_NUM_THREADS" not in spec.environment and spec.environment["DS_ACCELERATOR"] == "cpu"
    assert spec.command[:3] == ("python", "-m", "rocmft.serve.ask")


def test_webui_container_writes_only_llamaboards_folders_and_the_caches():
    ui = plan.webui("gfx1100", "docker", "127.0.0.1", 7860)
    facts = mi300x_node(hf_home="/data/hf")
    spec = docker.container(ui, A["gfx1100"], facts, image="rocmft:gfx1100", caller_env={"HF_HOME": "/data/hf"})
    assert spec.network_mode == "host" and spec.environment["GRADIO_SERVER_NAME"] == "127.0.0.1"
    assert spec.command == ("python", "-m", "rocmft.serve.llamaboard") and spec.environment["PYTHONPATH"] == "src"
    # HF_HOME is the image's own (no token file); the hub and datasets caches are the host's
    assert spec.environment["HF_HOME"] == f"{ROOT}/.cache/containers/rocmft_gfx1100/hf"
    assert spec.environment["HF_HUB_CACHE"] == "/data/hf/hub"
    assert writable(spec) == {"/data/hf/hub", "/data/hf/datasets", f"{ROOT}/.cache/containers/rocmft_gfx1100",
                              f"{ROOT}/saves",
                              f"{ROOT}/llamaboard_cache", f"{ROOT}/llamaboard_config"}
    assert [m.read_only for m in spec.mounts if m.source == ROOT] == [True]


def test_webui_container_gets_its_password_and_no_credential_of_the_caller():
    """Issue 32: whoever logs in to LlamaBoard runs code in its container, so it holds nothing of yours."""
    ui = plan.webui("gfx1100", "docker", "127.0.0.1", 7860)
    env, generated, _ = plan.webui_environment({"HF_HOME": "/data/hf", "HF_TOKEN": "hf_x", "WANDB_API_KEY": "w"})
    spec = docker.container(ui, A["gfx1100"], mi300x_node(hf_home="/data/hf"), image="rocmft:gfx1100", caller_env=env)
    assert spec.secret_env == ("ROCMFT_WEBUI_PASSWORD",)
    created = rt.sdk_kwargs(spec, env)["environment"]
    assert created["ROCMFT_WEBUI_PASSWORD"] == generated
    assert "HF_TOKEN" not in created and "WANDB_API_KEY" not in created and "hf_x" not in repr(created)
