"""The pure half of RUNTIME=docker: the plan, the arch and the host's facts in, a `ContainerSpec` out.

`container_spec(plan, arch, host, image=...)` decides image, command, environment, devices, groups, IPC,
capabilities, network, ulimits, mounts, user and labels. Unit tests pin it for any host; `container.json` in
the run dir records it; `docker_run_argv` prints the same container as a `docker run` line (`make shell`).

Choices (docs/gpu.md explains them to users):
  - Paths: the project root is mounted at its own absolute path and is the working directory. The rendered
    files name paths relative to it, and every absolute path the plan carries (HF_HOME, TORCH_EXTENSIONS_DIR,
    a run dir under ROCMFT_RUNS, a model dir) means the same file on the host and in the container.
  - GPUs: by default every GPU of the recipe's arch and no other = /dev/kfd + the render nodes of those GPUs
    (ROCm docs, "Restricting GPU access": pass only the chosen /dev/dri/renderD* nodes). An RX 7900 XTX
    host with the Ryzen iGPU (gfx1036) enabled would otherwise hand the container both, and the image's
    entrypoint stops on the iGPU. A subset (GPUS=2,3) = /dev/kfd + only the render nodes of those GPUs. The
    KFD driver refuses a GPU whose render node the container cannot open, so the job cannot touch the other
    cards at all, and ROCr renumbers the visible ones from 0, so ROCR_VISIBLE_DEVICES is dropped (keeping
    "2,3" would select GPUs that do not exist in there). When the host's facts do not map a GPU to a render
    node, it falls back to /dev/dri (plus ROCR_VISIBLE_DEVICES for a subset).
  - ROCMFT_ARCHES (GPU arches): the arch table's GPU arches, so that the image's entrypoint suggests an image
    only for an arch rocmft builds (never ARCH=gfx1036 for an iGPU).
  - Groups by GID, not name: the image's /etc/group does not know the host's video/render GIDs.
  - `ipc=host` for training only: RCCL and PyTorch pass tensors between the ranks of one node through shared
    memory; AMD's ROCm container instructions use it (a private /dev/shm would be 64 MB by default). A
    server, and the cpu arch, get a private 2 GB /dev/shm instead.
  - Docker's default seccomp profile stays on; GPU arches get CAP_SYS_NICE, the capability that profile
    (moby profiles/seccomp/default.json) requires for the NUMA memory-policy calls get_mempolicy, mbind,
    set_mempolicy and set_mempolicy_home_node. They are the reason AMD's ROCm Docker page suggests
    `seccomp=unconfined` ("enables memory mapping", numactl): ROCr's libhsakmt binds pinned host buffers to
    the GPU's NUMA node with mbind and fails the allocation if mbind fails (fmm.c: bind_mem_to_numa,
    fmm_allocate_host_gpu), unless numa_available() already said no, which libnuma only does on EPERM from
    2.0.19 on. CAP_SYS_NICE opens those four calls and nothing else of the profile; `unconfined` opened all.
  - The project is mounted read-only; the run dir's job folder (output/), the caches read-write (see
    `container_spec`); the run dir above output/ stays the host's (runs.py, hostio.py).
  - memlock unlimited on GPU arches: ROCr/RCCL pin (mlock) host buffers for DMA.
  - The container runs as the invoking user (uid:gid), so run files are not root-owned; HOME is /tmp of the
    container's own filesystem: private to that container and gone with it, never the host's and never another
    container's (one shared HOME let a training job's ~/.bashrc run in the next `make shell`, with HF_TOKEN:
    issue 43, N11), as the validation, tiny-model and fetch containers have it; compiled-code caches (torch extensions,
    Triton, MIOpen, HF_MODULES_CACHE) are the image's own, <project>/.cache/containers/<image>/, kept
    between runs of that image and never shared with the host (OWN_CACHES).
  - Secrets (HF_TOKEN, ...): the spec holds their NAMES only; the values are read from the caller's
    environment when the container is created and are never written to a file by rocmft.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ...hardware import arches
from ...hardware.arches import Arch
from ...hardware.host import DRI, KFD, HostFacts
from ...recipe.recipes import SECRET_ENV
from ...run.jobfiles import JOB_DIR
from ..plan import LaunchPlan

LABEL = "ai.rocmft."
RUN_LABEL = LABEL + "run"
CONTAINER_HOME = "/tmp"  # in the container's own filesystem: no mount, nothing kept (see the module docstring)
CPU_SHM = "2g"
# Rendered LLaMA-Factory keys that name files the job reads; an absolute path outside the mounts gets a
# read-only mount of its own (a model directory kept elsewhere, say /data/models/llama3-8b).
INPUT_KEYS = ("model_name_or_path", "adapter_name_or_path", "dataset_dir", "tokenized_path")
# Caches the plan passes by absolute path; outside the mounts they get a read-write mount (created first).
CACHE_ENV = ("TORCH_EXTENSIONS_DIR", "MPLCONFIGDIR", "HF_HUB_CACHE", "TRITON_CACHE_DIR", "MIOPEN_USER_DB_PATH")
# Compiled code and settings a later process loads (a .so from torch's extension loader, Triton kernels,
# remote model code transformers copies into HF_MODULES_CACHE, matplotlibrc): containers get their own,
# one folder per image under CONTAINER_CACHES, never the host's (a .so planted by container code ran in a
# later RUNTIME=local run: issue 32). A recipe that sets one in env: keeps it (launch/mountable.py judges it).
CONTAINER_CACHES = ".cache/containers"
OWN_CACHES = {"TORCH_EXTENSIONS_DIR": "torch_extensions", "TRITON_CACHE_DIR": "triton", "MPLCONFIGDIR": "matplotlib",
              "HF_MODULES_CACHE": "hf_modules", "MIOPEN_USER_DB_PATH": "miopen", "MIOPEN_CUSTOM_CACHE_DIR": "miopen"}
OFFLINE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Mount:
    source: str  # host path
    target: str  # container path (the same path: see the module docstring)
    read_only: bool = False
    create: bool = False  # a cache the launcher creates when missing; False = an input that must exist
    made_by_launch: bool = False  # the run dir: created when the run is committed, after the checks
    why: str = ""
    # "cache" (a path from the plan's env) or "input" (a path from the rendered args): the recipe chose them,
    # so checks.check_mounts judges them (launch/mountable.py); "" for what rocmft itself mounts
    kind: str = field(default="", compare=False)


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int
    hard: int


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    command: tuple[str, ...]
    name: str
    environment: Mapping[str, str]  # never a secret
    secret_env: tuple[str, ...]  # names only; values come from the caller's environment at create time
    devices: tuple[str, ...]
    group_add: tuple[str, ...]
    ipc_mode: str | None
    shm_size: str | None
    cap_add: tuple[str, ...]
    ulimits: tuple[Ulimit, ...]
    mounts: tuple[Mount, ...]
    working_dir: str
    user: str
    labels: Mapping[str, str]
    init: bool = True
    interactive: bool = False
    network_mode: str | None = None  # None: Docker's default bridge

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["environment"] = dict(sorted(self.environment.items()))
        data["labels"] = dict(sorted(self.labels.items()))
        return data

    def to_json(self) -> str:
        return json.dumps({**self.to_dict(), "docker_run": docker_run_argv(self)}, indent=2) + "\n"


def _inside(path: str, base: str) -> bool:
    path, base = posixpath.normpath(path), posixpath.normpath(base)
    return path == base or path.startswith(base.rstrip("/") + "/")


def _python_command(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The plan's argv with the host's interpreter replaced by the image's `python` (its venv is on PATH)."""
    if argv and posixpath.basename(argv[0]).startswith("python"):
        return ("python", *argv[1:])
    return tuple(argv)


def container_spec(
    plan: LaunchPlan,
    arch: Arch,
    host: HostFacts,
    *,
    image: str,
    args: Mapping[str, Any] | None = None,
    launcher_pid: int | None = None,
    command: tuple[str, ...] | None = None,
    name: str | None = None,
    interactive: bool = False,
    training: bool = True,
    writable: tuple[str, ...] = (),
    network_mode: str | None = None,
) -> ContainerSpec:
    """Plan + arch + host facts -> the container. `args` are the rendered LLaMA-Factory args (for mounts
    of inputs kept outside the project); `command`/`name`/`interactive` are for `make shell`; a server
    (`training=False`) gets no host IPC, `writable` project folders and its `network_mode`."""
    if arch.name != plan.arch:
        raise ValueError(f"plan is for {plan.arch}, arch is {arch.name}")
    root = posixpath.normpath(host.project_root)
    if not plan.run_path:
        run_dir = ""  # `make shell`: no run
    else:
        run_dir = plan.run_path if posixpath.isabs(plan.run_path) else posixpath.join(root, plan.run_path)

    # The checkout is read-only: code run inside (a model's remote code, a pickled checkpoint) must not
    # rewrite .git/config, .venv/bin or the Makefile that the host runs next. Only what the job writes is
    # writable: its run dir (every run dir for `make shell`), the caches and `writable` (LlamaBoard's).
    mounts = [Mount(root, root, read_only=True,
                    why="the project, read-only: recipes, data, models, code; the job's working directory "
                        "(paths in the rendered files are relative to it)")]

    def covered(path: str, *, rw: bool) -> bool:
        return any(_inside(path, m.source) for m in mounts if not (rw and m.read_only))

    def writable_dir(path: str, why: str, *, made_by_launch: bool = False, kind: str = "") -> None:
        path = posixpath.normpath(path)
        if not covered(path, rw=True):
            mounts.append(Mount(path, path, create=not made_by_launch, made_by_launch=made_by_launch, why=why,
                                kind=kind))

    runs_dir = posixpath.normpath(host.runs_dir) if host.runs_dir else posixpath.join(root, "runs")
    if not run_dir and training:
        writable_dir(runs_dir, "run dirs: what a shell may train into")
    elif not covered(runs_dir, rw=False):  # other runs stay readable (RESUME=, the adapter a server loads)
        mounts.append(Mount(runs_dir, runs_dir, read_only=True, create=True,
                            why="run dirs (ROCMFT_RUNS is outside the project), read-only"))
    if run_dir:
        # Only the job folder: the run dir above it is the host's (status.json, train.log, plan.json), so
        # nothing the job plants there (a symlink at a name the host writes next) is ever in the host's way.
        if not covered(run_dir, rw=False):
            mounts.append(Mount(posixpath.normpath(run_dir), posixpath.normpath(run_dir), read_only=True,
                                made_by_launch=True, why="this run's directory, read-only: the host's files"))
        writable_dir(posixpath.join(run_dir, JOB_DIR), f"this run's {JOB_DIR}/: all the job writes",
                     made_by_launch=True)
    # HF: the hub and datasets caches of HF_HOME, not HF_HOME itself: its `token` and `stored_tokens` stay
    # out, and modules/ (remote code the host imports) is the container's own. An offline job only reads the
    # hub cache: read-only then, so it cannot rewrite the model code a later run loads.
    hf_home = posixpath.normpath(host.hf_home)
    own = posixpath.join(root, CONTAINER_CACHES, image_slug(image))
    hub = posixpath.normpath(plan.env.get("HF_HUB_CACHE") or posixpath.join(hf_home, "hub"))
    datasets = posixpath.join(hf_home, "datasets")
    if str(plan.env.get("HF_HUB_OFFLINE", "")).lower() in OFFLINE and not covered(hub, rw=False):
        mounts.append(Mount(hub, hub, read_only=True, create=True, why="HF hub cache, read-only (an offline job)"))
    else:
        writable_dir(hub, "HF hub cache: models and their code")
    writable_dir(datasets, "HF datasets cache")
    writable_dir(own, "this image's own caches: compiled extensions, kernels, remote model code, HF_HOME")
    for key in CACHE_ENV:
        value = plan.env.get(key, "")
        if posixpath.isabs(value) and key != "HF_HUB_CACHE":
            writable_dir(value, f"{key} cache", kind="cache")
    tuned = plan.env.get("PYTORCH_TUNABLEOP_FILENAME", "")
    if posixpath.isabs(tuned):  # TUNE=1 (rocmft.launch.tuning): written when the job exits, kept for later runs
        writable_dir(posixpath.dirname(tuned), "TunableOp GEMM results of this image and model shape (TUNE=1)",
                     kind="cache")
    for folder in writable:
        writable_dir(posixpath.join(root, folder), f"{folder}/ (written by the program in the container)")
    for key in INPUT_KEYS:
        named = str((args or {}).get(key) or "")
        # adapters stack as a comma-separated list (a run started FROM an earlier run's adapter)
        for value in named.split(",") if key == "adapter_name_or_path" else [named]:
            value = value.strip()
            if posixpath.isabs(value) and not covered(value, rw=False):
                mounts.append(Mount(posixpath.normpath(value), posixpath.normpath(value), read_only=True,
                                    why=f"{key} outside the project (read-only)", kind="input"))

    env = {k: v for k, v in plan.env.items() if k not in SECRET_ENV}
    env["HF_HOME"] = posixpath.join(own, "hf")  # no token file in there; secrets come by name (HF_TOKEN)
    env["HF_HUB_CACHE"] = hub
    env["HF_DATASETS_CACHE"] = datasets
    for key, folder in OWN_CACHES.items():
        env.setdefault(key, posixpath.join(own, folder))
    env["HOME"] = CONTAINER_HOME
    if run_dir:  # report_to: wandb writes ./wandb under the working directory, which is read-only
        env.setdefault("WANDB_DIR", posixpath.join(run_dir, JOB_DIR))

    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    ipc_mode, shm_size = None, CPU_SHM
    cap_add: tuple[str, ...] = ()
    ulimits: tuple[Ulimit, ...] = ()
    if arch.is_gpu:
        nodes = host.render_nodes(arch_gpu_indices(arch, host, plan.visible_devices))
        if nodes:
            devices = (KFD, *nodes)
            env.pop("ROCR_VISIBLE_DEVICES", None)  # only these GPUs exist in there, numbered from 0
        else:
            devices = (KFD, DRI)  # every GPU, or a subset by ROCR_VISIBLE_DEVICES when nodes are unknown
        env["ROCMFT_ARCHES"] = " ".join(a.name for a in arches.table().values() if a.is_gpu)
        group_add = tuple(dict.fromkeys(str(g) for g in (host.video_gid, host.render_gid) if g is not None))
        if training:
            ipc_mode, shm_size = "host", None
        cap_add = ("SYS_NICE",)
        ulimits = (Ulimit("memlock", -1, -1),)

    labels = {LABEL + "arch": arch.name, LABEL + "image": image}
    if run_dir:
        labels[RUN_LABEL] = run_dir  # how `make runs` finds a container whose launcher is gone
    else:
        labels[LABEL + "shell"] = "1"
    if host.hostname:
        labels[LABEL + "launcher.host"] = host.hostname
    if launcher_pid is not None:
        labels[LABEL + "launcher.pid"] = str(launcher_pid)
    return ContainerSpec(
        image=image,
        command=tuple(command) if command is not None else _python_command(plan.argv),
        name=name or f"rocmft-{posixpath.basename(run_dir.rstrip('/')) or 'shell'}",
        environment=env,
        secret_env=plan.secret_env,
        devices=devices,
        group_add=group_add,
        ipc_mode=ipc_mode,
        shm_size=shm_size,
        cap_add=cap_add,
        network_mode=network_mode,
        ulimits=ulimits,
        mounts=tuple(mounts),
        working_dir=root,
        user=f"{host.uid}:{host.gid}",
        labels=labels,
        init=True,
        interactive=interactive,
    )


def arch_gpu_indices(arch: Arch, host: HostFacts, selected: tuple[str, ...] | None) -> tuple[str, ...]:
    """The host GPUs a container for `arch` gets: the selection (GPUS=), else every GPU of that arch.
    Empty when the host's facts list none of that arch (then /dev/dri: the entrypoint says what it sees)."""
    if selected:
        return tuple(selected)
    return tuple(str(g.index) for g in host.gpus_of(arch.name))


def image_slug(image: str) -> str:
    """A folder name for an image reference (rocmft:gfx942 -> rocmft_gfx942)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in image).strip("._") or "image"


def docker_run_argv(spec: ContainerSpec, *, tty: bool = False) -> list[str]:
    """The same container as a `docker run` command line (secrets by name: the CLI reads their values)."""
    argv = ["docker", "run", "--rm", "--pull=never", "--name", spec.name]
    if spec.init:
        argv.append("--init")
    if spec.interactive:
        argv.append("-it" if tty else "-i")
    argv += [f"--device={d}" for d in spec.devices]
    argv += [f"--group-add={g}" for g in spec.group_add]
    if spec.ipc_mode:
        argv.append(f"--ipc={spec.ipc_mode}")
    if spec.shm_size:
        argv.append(f"--shm-size={spec.shm_size}")
    argv += [f"--cap-add={c}" for c in spec.cap_add]
    if spec.network_mode:
        argv.append(f"--network={spec.network_mode}")
    argv += [f"--ulimit={u.name}={u.soft}:{u.hard}" for u in spec.ulimits]
    argv += [f"--volume={m.source}:{m.target}" + (":ro" if m.read_only else "") for m in spec.mounts]
    argv += [f"--workdir={spec.working_dir}", f"--user={spec.user}"]
    argv += [f"--env={k}={v}" for k, v in sorted(spec.environment.items())]
    argv += [f"--env={name}" for name in spec.secret_env]
    argv += [f"--label={k}={v}" for k, v in sorted(spec.labels.items())]
    return [*argv, spec.image, *spec.command]
