"""RUNTIME=docker as data: the exact container for gfx942 x 8, gfx942 x GPUS=2,3, gfx1100 x 1 and cpu, built
from real recipes and a hand-made host (HostFacts); no secret in it; the checks before a launch. Then the
SDK driver's log plumbing against a FAKE client (what it shows: the log reaches train.log and the display,
the last lines of an early death are shown; what it cannot: anything a daemon does). The daemon's own
behaviour - a container that cannot start, a name conflict, SIGTERM and Ctrl-C - is tested against the
real one: tests/docker/test_container_lifecycle.py and test_container_train.py."""

from __future__ import annotations

import json

import pytest

from rocmft.hardware import arches
from rocmft.hardware import host as host_mod
from rocmft.hardware.host import GPU, HostFacts
from rocmft.io.problems import ProblemReport
from rocmft.launch import docker as rt
from rocmft.launch import plan as lp
from rocmft.recipe import recipes
from rocmft.run import runs

A = arches.table()
ROOT = "/home/alice/rocmft"
SECRET = "hf_TOPSECRETvalue123"
GPU_ARCHES = " ".join(name for name, a in A.items() if a.is_gpu)
CALLER = {"HF_HOME": "/data/hf", "HF_TOKEN": SECRET, "WANDB_API_KEY": "wandb_SECRET456", "PATH": "/usr/bin"}


def mi300x_node(**kw) -> HostFacts:
    """An 8x MI300X node as the KFD topology reports it: GPU i has render node renderD(128+i)."""
    gpus = tuple(GPU(i, "gfx942", "AMD Instinct MI300X", f"/dev/dri/renderD{128 + i}", f"0000:{0x0c + i:02x}:00.0")
                 for i in range(8))
    base = dict(uid=1000, gid=1000, user="alice", project_root=ROOT, hf_home="/data/hf", hf_home_explicit=True,
                runs_dir=f"{ROOT}/runs", home="/home/alice", hostname="mi300x-01", groups=(1000, 44, 109),
                video_gid=44, render_gid=109,
                devices=("/dev/kfd", *(f"/dev/dri/card{i}" for i in range(8)), *(g.render_node for g in gpus)),
                gpus=gpus, gpu_source="sysfs")
    base.update(kw)
    devices = base["devices"]
    base.setdefault("accessible", devices)
    return HostFacts(**base)


def workstation_7900xtx(**kw) -> HostFacts:
    base = dict(uid=1001, gid=1001, user="bob", project_root=ROOT, hf_home="/home/bob/.cache/huggingface",
                runs_dir=f"{ROOT}/runs", hostname="ws", groups=(1001, 44, 992), video_gid=44, render_gid=992,
                devices=("/dev/kfd", "/dev/dri/card0", "/dev/dri/renderD128"),
                gpus=(GPU(0, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD128"),), gpu_source="sysfs")
    base.update(kw)
    return HostFacts(**base)


def laptop(**kw) -> HostFacts:
    base = dict(uid=1000, gid=1000, user="carol", project_root=ROOT, hf_home=f"{ROOT}/.cache/hf",
                runs_dir=f"{ROOT}/runs", hostname="laptop")
    base.update(kw)
    return HostFacts(**base)


def plan_for(name, overrides=(), gpus=None, env=CALLER, run_path="runs/x"):
    r = recipes.load(name, list(overrides))
    return lp.build(r, A[r.arch], run_path, env, python="/usr/bin/python3", gpus=gpus)


def spec_for(name, host, overrides=(), gpus=None, **kw):
    p = plan_for(name, overrides, gpus)
    return rt.container_spec(p, A[p.arch], host, image=f"rocmft:{p.arch}", launcher_pid=4242, **kw)


GPU_FLAGS = dict(group_add=("44", "109"), ipc_mode="host", shm_size=None, cap_add=("SYS_NICE",),
                 ulimits=(rt.Ulimit("memlock", -1, -1),), init=True, interactive=False)
PROJECT_MOUNT = rt.Mount(ROOT, ROOT, read_only=True,
                         why="the project, read-only: recipes, data, models, code; the job's working directory "
                             "(paths in the rendered files are relative to it)")
# only the run dir's job folder: the run dir above it (status.json, train.log) is the host's (issue 32)
RUN_MOUNT = rt.Mount(f"{ROOT}/runs/x/output", f"{ROOT}/runs/x/output", made_by_launch=True,
                     why="this run's output/: all the job writes")
def hf_mounts(hf_home: str, image: str) -> tuple:
    """HF_HOME's hub and datasets caches (not its token file), and the image's own caches (issue 32)."""
    own = f"{ROOT}/.cache/containers/{image.replace(':', '_')}"
    return (rt.Mount(f"{hf_home}/hub", f"{hf_home}/hub", create=True, why="HF hub cache: models and their code"),
            rt.Mount(f"{hf_home}/datasets", f"{hf_home}/datasets", create=True, why="HF datasets cache"),
            rt.Mount(own, own, create=True,
                     why="this image's own caches: compiled extensions, kernels, remote model code, HF_HOME"))


def own_env(hf_home: str, image: str) -> dict:
    own = f"{ROOT}/.cache/containers/{image.replace(':', '_')}"
    return {"HF_HOME": f"{own}/hf", "HF_HUB_CACHE": f"{hf_home}/hub", "HF_DATASETS_CACHE": f"{hf_home}/datasets",
            "TORCH_EXTENSIONS_DIR": f"{own}/torch_extensions", "TRITON_CACHE_DIR": f"{own}/triton",
            "MPLCONFIGDIR": f"{own}/matplotlib", "HF_MODULES_CACHE": f"{own}/hf_modules",
            "MIOPEN_USER_DB_PATH": f"{own}/miopen", "MIOPEN_CUSTOM_CACHE_DIR": f"{own}/miopen"}


HF_MOUNTS = hf_mounts("/data/hf", "rocmft:gfx942")
HOME_MOUNT = rt.Mount(f"{ROOT}/.cache/container-home", f"{ROOT}/.cache/container-home", create=True,
                      why="HOME: pip and other tools' caches")


def writable(spec) -> list[str]:
    return [m.source for m in spec.mounts if not m.read_only]


def test_spec_gfx942_8gpu_plan_as_data():
    spec = spec_for("llama3-8b-z3", mi300x_node())
    assert spec == rt.ContainerSpec(
        image="rocmft:gfx942",
        command=("python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "8",
                 "--max_restarts", "2", "--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
                 "-m", "rocmft.worker", "--run-dir", "runs/x"),
        name="rocmft-x",
        environment={
            **own_env("/data/hf", "rocmft:gfx942"), "HOME": f"{ROOT}/.cache/container-home",
            # the gfx942 entry of docker/arches.yaml
            "HIP_FORCE_DEV_KERNARG": "1", "TORCH_BLAS_PREFER_HIPBLASLT": "1", "HSA_NO_SCRATCH_RECLAIM": "1",
            "NCCL_MIN_NCHANNELS": "112",
            "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",  # what LLaMA-Factory's launcher would set
            "PYTHONUNBUFFERED": "1", "OPTIM_TORCH": "0", "ROCMFT_RUN_DIR": "runs/x",
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "300",  # resilience.stop_grace_s: torchrun's wait for the ranks' save
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",  # max_restarts 2: a fresh store for each round
            "WANDB_DIR": f"{ROOT}/runs/x/output",  # not ./wandb in the read-only checkout
            "ROCMFT_ARCHES": GPU_ARCHES,  # the entrypoint names an image only for these
        },
        secret_env=("HF_TOKEN", "WANDB_API_KEY"),
        # every gfx942 GPU, by its render node (none of /dev/dri's card* nodes, no GPU of another arch)
        devices=("/dev/kfd", *(f"/dev/dri/renderD{128 + i}" for i in range(8))),
        mounts=(PROJECT_MOUNT, RUN_MOUNT, *HF_MOUNTS, HOME_MOUNT),
        working_dir=ROOT,
        user="1000:1000",
        labels={"ai.rocmft.run": f"{ROOT}/runs/x", "ai.rocmft.arch": "gfx942", "ai.rocmft.image": "rocmft:gfx942",
                "ai.rocmft.launcher.host": "mi300x-01", "ai.rocmft.launcher.pid": "4242"},
        **GPU_FLAGS,
    )
    assert "ROCR_VISIBLE_DEVICES" not in spec.environment


def test_spec_gfx942_gpus_2_3_plan_as_data():
    """GPUS=2,3: only those two render nodes enter the container, where ROCr numbers them 0 and 1; keeping
    ROCR_VISIBLE_DEVICES=2,3 in there would select GPUs that do not exist, so it is dropped."""
    p = plan_for("llama3-8b-z3", ["gpus_per_node=2"], gpus=("2", "3"))
    assert p.env["ROCR_VISIBLE_DEVICES"] == "2,3"  # the plan (and RUNTIME=local) select by variable
    spec = rt.container_spec(p, A["gfx942"], mi300x_node(), image="rocmft:gfx942", launcher_pid=4242)
    assert spec.devices == ("/dev/kfd", "/dev/dri/renderD130", "/dev/dri/renderD131")
    assert "ROCR_VISIBLE_DEVICES" not in spec.environment
    assert "HIP_VISIBLE_DEVICES" not in spec.environment and "CUDA_VISIBLE_DEVICES" not in spec.environment
    assert spec.command[spec.command.index("--nproc_per_node") + 1] == "2"
    assert spec.mounts == (PROJECT_MOUNT, RUN_MOUNT, *HF_MOUNTS, HOME_MOUNT)
    assert (spec.group_add, spec.ipc_mode, spec.cap_add, spec.ulimits) == (
        GPU_FLAGS["group_add"], "host", ("SYS_NICE",), (rt.Ulimit("memlock", -1, -1),))
    assert rt.check_host(p, A["gfx942"], mi300x_node()) == []


def test_spec_gpu_subset_without_known_render_nodes_keeps_rocr_selection():
    host = mi300x_node(gpus=tuple(GPU(i, "gfx942") for i in range(8)), gpu_source="rocminfo")
    spec = spec_for("llama3-8b-z3", host, ["gpus_per_node=2"], gpus=("2", "3"))
    assert spec.devices == ("/dev/kfd", "/dev/dri")
    assert spec.environment["ROCR_VISIBLE_DEVICES"] == "2,3"


def test_spec_gfx1100_1gpu_plan_as_data():
    spec = spec_for("qwen2.5-7b-lora-7900xtx", workstation_7900xtx())
    assert spec.command == ("python", "-u", "-m", "rocmft.worker", "--run-dir", "runs/x")
    assert spec.environment == {
        **own_env("/home/bob/.cache/huggingface", "rocmft:gfx1100"), "HOME": f"{ROOT}/.cache/container-home",
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",  # the gfx1100 entry of docker/arches.yaml
        "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",
        "PYTHONUNBUFFERED": "1", "OPTIM_TORCH": "0", "ROCMFT_RUN_DIR": "runs/x", "WANDB_DIR": f"{ROOT}/runs/x/output",
        "ROCMFT_ARCHES": GPU_ARCHES,
    }
    assert spec.devices == ("/dev/kfd", "/dev/dri/renderD128")
    assert spec.group_add == ("44", "992")  # the host's GIDs, not names the image may not know
    assert spec.user == "1001:1001"
    assert spec.mounts == (PROJECT_MOUNT, RUN_MOUNT, *hf_mounts("/home/bob/.cache/huggingface", "rocmft:gfx1100"),
                           HOME_MOUNT)
    assert (spec.ipc_mode, spec.shm_size, spec.cap_add) == ("host", None, ("SYS_NICE",))
    assert spec.ulimits == (rt.Ulimit("memlock", -1, -1),)
    assert spec.image == "rocmft:gfx1100" and spec.labels["ai.rocmft.arch"] == "gfx1100"


def test_spec_gfx1100_as_docker_run_line():
    argv = rt.docker_run_argv(spec_for("qwen2.5-7b-lora-7900xtx", workstation_7900xtx()))
    assert argv == [
        "docker", "run", "--rm", "--pull=never", "--name", "rocmft-x", "--init",
        "--device=/dev/kfd", "--device=/dev/dri/renderD128", "--group-add=44", "--group-add=992", "--ipc=host",
        "--cap-add=SYS_NICE", "--ulimit=memlock=-1:-1",
        f"--volume={ROOT}:{ROOT}:ro", f"--volume={ROOT}/runs/x/output:{ROOT}/runs/x/output",
        "--volume=/home/bob/.cache/huggingface/hub:/home/bob/.cache/huggingface/hub",
        "--volume=/home/bob/.cache/huggingface/datasets:/home/bob/.cache/huggingface/datasets",
        f"--volume={ROOT}/.cache/containers/rocmft_gfx1100:{ROOT}/.cache/containers/rocmft_gfx1100",
        f"--volume={ROOT}/.cache/container-home:{ROOT}/.cache/container-home",
        f"--workdir={ROOT}", "--user=1001:1001",
        *(f"--env={k}={v}" for k, v in sorted({
            **own_env("/home/bob/.cache/huggingface", "rocmft:gfx1100"), "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",
            "HOME": f"{ROOT}/.cache/container-home", "OPTIM_TORCH": "0", "PYTHONUNBUFFERED": "1",
            "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",
            "ROCMFT_ARCHES": GPU_ARCHES, "ROCMFT_RUN_DIR": "runs/x", "WANDB_DIR": f"{ROOT}/runs/x/output"}.items())),
        "--env=HF_TOKEN", "--env=WANDB_API_KEY",
        "--label=ai.rocmft.arch=gfx1100", "--label=ai.rocmft.image=rocmft:gfx1100",
        "--label=ai.rocmft.launcher.host=ws", "--label=ai.rocmft.launcher.pid=4242",
        f"--label=ai.rocmft.run={ROOT}/runs/x",
        "rocmft:gfx1100", "python", "-u", "-m", "rocmft.worker", "--run-dir", "runs/x",
    ]


def test_spec_cpu_has_no_gpu_flags():
    spec = spec_for("tiny-cpu", laptop(), ["gpus_per_node=2"])
    assert spec.devices == () and spec.group_add == () and spec.cap_add == () and spec.ulimits == ()
    assert (spec.ipc_mode, spec.shm_size) == (None, "2g")
    assert spec.environment["DS_ACCELERATOR"] == "cpu" and spec.environment["OMP_NUM_THREADS"] == "1"
    # HF_HOME inside the project: writable on its own, the checkout around it read-only
    assert spec.mounts[0] == PROJECT_MOUNT and writable(spec) == [
        f"{ROOT}/runs/x/output", f"{ROOT}/.cache/hf/hub", f"{ROOT}/.cache/hf/datasets",
        f"{ROOT}/.cache/containers/rocmft_cpu", f"{ROOT}/.cache/container-home"]
    assert spec.command[:3] == ("python", "-m", "torch.distributed.run")


@pytest.mark.parametrize("name,host", [("llama3-8b-z3", mi300x_node()), ("qwen2.5-7b-lora-7900xtx", workstation_7900xtx()),
                                       ("tiny-cpu", laptop())])
def test_no_secret_in_spec_or_records(name, host):
    spec = spec_for(name, host)
    recorded = spec.to_json() + " ".join(rt.docker_run_argv(spec)) + repr(spec)
    assert SECRET not in recorded and "wandb_SECRET456" not in recorded
    assert "HF_TOKEN" in spec.secret_env and "HF_TOKEN" not in spec.environment
    # the values exist only in the environment handed to the daemon at create time
    env = rt.runtime_environment(spec, CALLER)
    assert env["HF_TOKEN"] == SECRET and env["WANDB_API_KEY"] == "wandb_SECRET456"
    assert rt.sdk_kwargs(spec, CALLER)["environment"]["HF_TOKEN"] == SECRET
    assert "HF_TOKEN" not in rt.runtime_environment(spec, {})  # unset at launch: not passed


def test_sdk_kwargs_gpu_subset():
    spec = spec_for("llama3-8b-z3", mi300x_node(), ["gpus_per_node=2"], gpus=("2", "3"))
    kw = rt.sdk_kwargs(spec, {})
    assert kw["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD130:/dev/dri/renderD130:rwm",
                             "/dev/dri/renderD131:/dev/dri/renderD131:rwm"]
    assert kw["group_add"] == ["44", "109"] and kw["ipc_mode"] == "host" and kw["init"] is True
    assert [(u["Name"], u["Soft"], u["Hard"]) for u in kw["ulimits"]] == [("memlock", -1, -1)]
    assert kw["volumes"] == {ROOT: {"bind": ROOT, "mode": "ro"}, f"{ROOT}/runs/x/output": {"bind": f"{ROOT}/runs/x/output", "mode": "rw"},
                             "/data/hf/hub": {"bind": "/data/hf/hub", "mode": "rw"},
                             "/data/hf/datasets": {"bind": "/data/hf/datasets", "mode": "rw"},
                             HF_MOUNTS[2].source: {"bind": HF_MOUNTS[2].source, "mode": "rw"},
                             HOME_MOUNT.source: {"bind": HOME_MOUNT.source, "mode": "rw"}}
    assert kw["user"] == "1000:1000" and kw["working_dir"] == ROOT and kw["cap_add"] == ["SYS_NICE"]
    assert "security_opt" not in kw and kw["network_mode"] is None  # Docker's seccomp profile stays on
    assert "detach" not in kw and "auto_remove" not in kw  # removed explicitly after wait()


def test_mounts_for_inputs_and_runs_outside_the_project():
    p = plan_for("llama3-8b-lora", run_path="/scratch/runs/x")
    host = mi300x_node(runs_dir="/scratch/runs")
    spec = rt.container_spec(p, A["gfx942"], host, image="rocmft:gfx942",
                             args={"model_name_or_path": "/models/llama3-8b", "dataset_dir": "data",
                                   "adapter_name_or_path": "/data/hf/adapters/a"})
    assert [(m.source, m.read_only) for m in spec.mounts] == [
        (ROOT, True), ("/scratch/runs", True), ("/scratch/runs/x/output", False), ("/data/hf/hub", False),
        ("/data/hf/datasets", False), (HF_MOUNTS[2].source, False), (HOME_MOUNT.source, False),
        ("/models/llama3-8b", True),  # the model dir: read-only
        ("/data/hf/adapters/a", True),  # HF_HOME itself is not mounted (its token file): the adapter read-only
    ]
    assert spec.labels["ai.rocmft.run"] == "/scratch/runs/x" and spec.name == "rocmft-x"
    # a hub id or a path inside the project needs no mount of its own
    spec2 = rt.container_spec(plan_for("llama3-8b-lora"), A["gfx942"], mi300x_node(), image="i",
                              args={"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct"})
    assert len(spec2.mounts) == 6


def test_shell_writes_every_run_dir_and_a_server_none():
    shell = rt.container_spec(lp.shell(A["gfx942"], CALLER, None), A["gfx942"], mi300x_node(), image="i")
    caches = ["/data/hf/hub", "/data/hf/datasets", f"{ROOT}/.cache/containers/i"]
    assert writable(shell) == [f"{ROOT}/runs", *caches, HOME_MOUNT.source] and shell.ipc_mode == "host"
    server = rt.container_spec(lp.shell(A["gfx942"], CALLER, None, argv=("llamafactory-cli", "api")), A["gfx942"],
                               mi300x_node(runs_dir="/scratch/runs"), image="i", training=False)
    assert writable(server) == [*caches, HOME_MOUNT.source] and server.ipc_mode is None
    assert ("/scratch/runs", True) in [(m.source, m.read_only) for m in server.mounts]  # adapters stay readable
    # a shell with the runs dir outside the project: one mount of it, writable (Docker refuses a duplicate)
    outside = rt.container_spec(lp.shell(A["gfx942"], CALLER, None), A["gfx942"], mi300x_node(runs_dir="/scratch/runs"),
                                image="i")
    sources = [m.source for m in outside.mounts]
    assert len(sources) == len(set(sources)) and "/scratch/runs" in writable(outside)


def test_missing_mount_source_is_a_problem(tmp_path):
    (tmp_path / "proj").mkdir()
    host = mi300x_node(project_root=str(tmp_path / "proj"), hf_home=str(tmp_path / "hf-cache"),
                       runs_dir=str(tmp_path / "proj" / "runs"))
    spec = rt.container_spec(plan_for("llama3-8b-lora"), A["gfx942"], host, image="i",
                             args={"model_name_or_path": "/nonexistent/model-dir"})
    problems = rt.check_mounts(spec)
    assert len(problems) == 1 and "/nonexistent/model-dir does not exist" in problems[0].line()
    assert not (tmp_path / "hf-cache").exists()
    assert rt.create_cache_dirs(spec) == []  # caches are created by the launcher, as the invoking user
    assert (tmp_path / "hf-cache").is_dir() and (tmp_path / "proj" / ".cache" / "container-home").is_dir()


def test_check_host_eight_gpus_on_a_one_gpu_host():
    host = mi300x_node(gpus=mi300x_node().gpus[:1], devices=("/dev/kfd", "/dev/dri/renderD128"))
    problems = rt.check_host(plan_for("llama3-8b-z3"), A["gfx942"], host)
    assert len(problems) == 1
    line = problems[0].line()
    assert "8 processes" in line and "1 gfx942 GPU(s)" in line and "gpus_per_node=1" in line


def test_check_host_no_gpu_points_to_doctor_and_demo():
    problems = rt.check_host(plan_for("llama3-8b-z3"), A["gfx942"], laptop())
    assert len(problems) == 1
    assert "no AMD GPU" in problems[0].message and "/dev/kfd is missing" in problems[0].message
    assert "make doctor" in problems[0].suggestion and "make demo" in problems[0].suggestion


def test_check_host_gpu_index_and_arch():
    p = plan_for("llama3-8b-z3", ["gpus_per_node=2"], gpus=("7", "8"))
    assert "GPU 8 does not exist" in rt.check_host(p, A["gfx942"], mi300x_node())[0].message
    wrong = rt.check_host(plan_for("llama3-8b-lora"), A["gfx942"], workstation_7900xtx())
    assert len(wrong) == 1 and "gfx1100" in wrong[0].message and wrong[0].suggestion.startswith("ARCH=gfx1100")
    assert rt.check_host(plan_for("tiny-cpu"), A["cpu"], laptop()) == []
    multi = rt.check_host(plan_for("llama3-8b-z3", ["nodes=2"]), A["gfx942"], mi300x_node())
    assert "RUNTIME=slurm" in multi[0].suggestion


def test_leftover_containers():
    found = [
        ("rocmft-a", "running", {"ai.rocmft.run": "/p/runs/a", "ai.rocmft.launcher.pid": "11", "ai.rocmft.launcher.host": "me"}),
        ("rocmft-b", "running", {"ai.rocmft.run": "/p/runs/b", "ai.rocmft.launcher.pid": "12", "ai.rocmft.launcher.host": "me"}),
        ("rocmft-c", "running", {"ai.rocmft.run": "/p/runs/c", "ai.rocmft.launcher.pid": "13", "ai.rocmft.launcher.host": "other"}),
        ("rocmft-d", "exited", {"ai.rocmft.run": "/p/runs/d", "ai.rocmft.launcher.pid": "14", "ai.rocmft.launcher.host": "other"}),
    ]
    left, active = rt.leftovers(found, "me", alive=lambda pid: pid == 11)
    assert [c.name for c in left] == ["rocmft-b", "rocmft-d"]
    assert left[0].fix == "docker rm -f rocmft-b" and "launcher is gone" in left[0].why
    assert active == {"/p/runs/a": "rocmft-a", "/p/runs/c": "rocmft-c"}


# ---------------------------------------------------------------- the SDK driver's plumbing, against a FAKE daemon

class FakeContainer:
    def __init__(self, chunks=(), code=0):
        self.id, self.name = "c0ffee" * 8, "rocmft-x"
        self.chunks, self.code = list(chunks), code
        self.removed = False
        self.calls: list[str] = []

    def start(self):
        self.calls.append("start")

    def logs(self, stream=False, follow=False, tail=None):
        return iter(self.chunks) if stream else b"".join(self.chunks)

    def wait(self):
        return {"StatusCode": self.code}

    def remove(self, force=False):
        self.calls.append(f"remove(force={force})")
        self.removed = True


class FakeClient:
    def __init__(self, container):
        self.container = container
        self.created: dict = {}
        self.containers = self

    def create(self, **kw):
        self.created = kw
        return self.container


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "runs" / "x"
    (d / "output").mkdir(parents=True)  # as runs.create makes it: the job's folder
    (d / "train.yaml").write_text("stage: sft\n")
    return d


def cpu_spec():
    return spec_for("tiny-cpu", laptop())


def test_run_streams_logs_and_returns_the_exit_code(run_dir, capsys):
    from rocmft.run import events

    lines = [b"step 1\n", b"{'loss': 2.5, 'grad_norm': 1.0}\n", b"[rocmft] from the job\n", b"done\n"]
    # what the job in the container leaves in the mounted run dir (the same path on the host)
    events.path(run_dir).write_text(events.encode({"event": "step", "step": 1, "max_steps": 4, "loss": 2.5}))
    container = FakeContainer(lines, code=0)
    client = FakeClient(container)
    assert rt.run_container(client, cpu_spec(), run_dir, caller_env={"HF_TOKEN": SECRET}) == 0
    assert (run_dir / "train.log").read_bytes() == b"".join(lines)
    out = capsys.readouterr().out
    assert out.splitlines() == ["[rocmft] from the job", "[rocmft] step 1/4  loss 2.5000"]
    assert container.calls == ["start", "remove(force=True)"]
    assert client.created["environment"]["HF_TOKEN"] == SECRET and client.created["init"] is True
    status = runs.read_status(run_dir)
    assert status["state"] == "running" and status["runtime"] == "docker" and status["container"] == "rocmft-x"
    assert SECRET not in json.dumps(status)


def test_container_that_dies_at_start_shows_its_last_lines(run_dir, capsys):
    from rocmft.launch.outcome import finish

    lines = [f"line {i}\n".encode() for i in range(30)] + [b"ModuleNotFoundError: No module named 'llamafactory'\n"]
    container = FakeContainer(lines, code=1)
    assert rt.run_container(FakeClient(container), cpu_spec(), run_dir, quiet=True) == 1
    assert finish(run_dir, 1, "cpu") == 1  # what `launch` does next, as every runtime
    out = capsys.readouterr().out
    assert "exited with code 1" in out and "No module named 'llamafactory'" in out
    assert "line 29" in out and "line 10\n" not in out  # the last lines, not the whole log
    assert out.splitlines()[-1] == f"[rocmft] full output: {run_dir}/train.log"
    assert container.removed


# ---------------------------------------------------------------- daemon and image refusals

class FakeImage:
    def __init__(self, arch, tags=("rocmft:gfx942",)):
        self.attrs = {"Config": {"Labels": {"ai.rocmft.arch": arch} if arch else {}}}
        self.tags, self.id, self.short_id = list(tags), "sha256:abc", "sha256:abc"


class FakeImages:
    def __init__(self, images):
        self.images = images

    def get(self, ref):
        from docker.errors import ImageNotFound

        if ref in self.images:
            return self.images[ref]
        raise ImageNotFound(ref)


def client_with(images):
    client = FakeClient(None)
    client.images = FakeImages(images)
    return client


def test_missing_image_says_which_make_image_to_run():
    with pytest.raises(ProblemReport) as exc:
        rt.resolve_image(client_with({}), A["gfx942"])
    assert "no image for arch gfx942" in str(exc.value) and "make image ARCH=gfx942" in str(exc.value)
    with pytest.raises(ProblemReport) as exc:
        rt.resolve_image(client_with({}), A["cpu"])
    assert "make image ARCH=cpu OFFLINE=1" in str(exc.value)


def test_image_built_for_another_arch_is_refused():
    from rocmft.image import tags

    client = client_with({tags("gfx942")[1]: FakeImage("gfx1100")})
    with pytest.raises(ProblemReport) as exc:
        rt.resolve_image(client, A["gfx942"])
    assert "is built for gfx1100" in str(exc.value)
    client = client_with({"my/image:1": FakeImage(None)})
    with pytest.raises(ProblemReport) as exc:
        rt.resolve_image(client, A["gfx942"], "my/image:1")
    assert "no ai.rocmft.arch label" in str(exc.value)
    tag, _image = rt.resolve_image(client_with({tags("gfx942")[0]: FakeImage("gfx942", tags=[tags("gfx942")[0]])}), A["gfx942"])
    assert tag == tags("gfx942")[0]


def test_unreachable_daemon_says_how_to_start_it(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(ProblemReport) as exc:
        rt.connect(timeout=5)
    text = str(exc.value)
    assert "cannot reach the Docker daemon" in text and "RUNTIME=local" in text and "dockerd-up.sh" in text


# ---- an RX 7900 XTX host with the Ryzen iGPU (gfx1036) enabled, read from a fake KFD topology (the tree host.py
# reads on a real machine): the run gets the render node of the gfx1100 alone, whichever enumerates first.

def kfd_topology(tmp_path, gfx_target_versions: list[int]):
    """/sys/class/kfd/kfd/topology/nodes as the amdgpu driver writes it: node 0 the CPU, then one per GPU."""
    nodes = tmp_path / "topology" / "nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    for i, version in enumerate(gfx_target_versions, start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {192 if version == 110000 else 4}\nsimd_per_cu 2\n"
            f"gfx_target_version {version}\ndrm_render_minor {127 + i}\n")
    return nodes


def igpu_workstation(tmp_path, order: list[int]) -> HostFacts:
    gpus = tuple(host_mod.gpus_from_sysfs(kfd_topology(tmp_path, order)))
    nodes = tuple(g.render_node for g in gpus)
    return workstation_7900xtx(gpus=gpus, devices=("/dev/kfd", "/dev/dri/card0", "/dev/dri/card1", *nodes))


@pytest.mark.parametrize("order, dgpu_node", [([110000, 100306], "/dev/dri/renderD128"),
                                              ([100306, 110000], "/dev/dri/renderD129")])
def test_igpu_host_plan_as_data_the_run_gets_the_gfx1100_render_node_alone(tmp_path, order, dgpu_node):
    host = igpu_workstation(tmp_path, order)
    assert [g.gfx for g in host.gpus] == ["gfx1100" if v == 110000 else "gfx1036" for v in order]
    p = plan_for("qwen2.5-7b-lora-7900xtx")
    assert rt.check_host(p, A["gfx1100"], host) == []
    spec = rt.container_spec(p, A["gfx1100"], host, image="rocmft:gfx1100")
    assert spec.devices == ("/dev/kfd", dgpu_node)  # not /dev/dri: the iGPU's node stays out
    assert "ROCR_VISIBLE_DEVICES" not in spec.environment  # in there, the one GPU is GPU 0
    assert "gfx1036" not in spec.environment["ROCMFT_ARCHES"].split()
    argv = rt.docker_run_argv(spec)
    assert f"--device={dgpu_node}" in argv and "--device=/dev/dri" not in argv


def test_igpu_host_eight_process_recipe_counts_only_the_gfx1100(tmp_path):
    host = igpu_workstation(tmp_path, [100306, 110000])
    [problem] = rt.check_host(plan_for("qwen2.5-7b-z3-offload"), A["gfx1100"], host)
    assert "1 gfx1100 GPU(s) (and 1 of another arch, not used)" in problem.message
    assert problem.suggestion.startswith("SET=gpus_per_node=1")


def test_an_arch_outside_the_table_is_never_suggested(tmp_path):
    """A host whose only GPU is the iGPU: the error names the arches rocmft builds, never ARCH=gfx1036."""
    gpus = tuple(host_mod.gpus_from_sysfs(kfd_topology(tmp_path, [100306])))
    host = workstation_7900xtx(gpus=gpus)
    [problem] = rt.check_host(plan_for("qwen2.5-7b-lora-7900xtx"), A["gfx1100"], host)
    assert "gfx1036" in problem.message and "ARCH=gfx1036" not in problem.line()
    assert "gfx1100" in problem.suggestion and "not an arch rocmft builds for" in problem.suggestion


def test_containers_get_compiled_code_caches_of_their_own_and_no_hf_token_plan_as_data():
    """Issue 32 item 3: a .so planted in a container's TORCH_EXTENSIONS_DIR ran in a later RUNTIME=local run
    through torch's extension loader, and HF_HOME handed containers the Hub token file. The host's
    TORCH_EXTENSIONS_DIR (the Makefile's, in the caller's environment) is neither passed nor writable in
    there; the container's caches are per image; HF_HOME's token is not under any mount."""
    host_ext = f"{ROOT}/.cache/torch_extensions"
    caller = {**CALLER, "TORCH_EXTENSIONS_DIR": host_ext, "MPLCONFIGDIR": f"{ROOT}/.cache/matplotlib"}
    p = plan_for("llama3-8b-lora", env=caller)
    assert "TORCH_EXTENSIONS_DIR" not in p.env and "MPLCONFIGDIR" not in p.env
    specs = {image: rt.container_spec(p, A["gfx942"], mi300x_node(), image=image) for image in ("rocmft:gfx942", "other:1")}
    for image, spec in specs.items():
        own = f"{ROOT}/.cache/containers/{image.replace(':', '_')}"
        for key in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "HF_MODULES_CACHE", "MPLCONFIGDIR"):
            assert spec.environment[key].startswith(own + "/"), key
        writable_mounts = [m.source for m in spec.mounts if not m.read_only]
        assert not any(host_ext == w or host_ext.startswith(w + "/") for w in writable_mounts)
        assert not any("/data/hf/token".startswith(m.source.rstrip("/") + "/") for m in spec.mounts)
        assert spec.environment["HF_HOME"] == f"{own}/hf"
    assert specs["rocmft:gfx942"].environment["TORCH_EXTENSIONS_DIR"] != specs["other:1"].environment["TORCH_EXTENSIONS_DIR"]
    # an offline job only reads the hub cache: read-only, so it cannot rewrite model code a host run loads
    offline = rt.container_spec(plan_for("llama3-8b-lora", env={**caller, "HF_HUB_OFFLINE": "1"}), A["gfx942"],
                                mi300x_node(), image="i")
    assert [(m.source, m.read_only) for m in offline.mounts if m.source == "/data/hf/hub"] == [("/data/hf/hub", True)]
    # a recipe that sets its own cache keeps it (and launch/mountable.py judges where it points)
    mine = rt.container_spec(plan_for("llama3-8b-lora", [f"env.TRITON_CACHE_DIR={ROOT}/.cache/triton-mine"]),
                             A["gfx942"], mi300x_node(), image="i")
    assert mine.environment["TRITON_CACHE_DIR"] == f"{ROOT}/.cache/triton-mine"
