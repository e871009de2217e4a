"""The launch plan: a pure function from (recipe, arch, run path, environment) to what gets executed.

Nothing else in the project builds an argv. The local, Docker, Slurm and Kubernetes runtimes take this
plan and only decide WHERE it runs (a process, a container, an sbatch script, a pod).

Why torchrun on our worker, not `llamafactory-cli train` with FORCE_TORCHRUN: llamafactory-cli turns any
rank's failure into exit 1 and rebuilds the environment itself (it overwrites PYTORCH_CUDA_ALLOC_CONF
unless OPTIM_TORCH=0); calling torchrun directly keeps the real exit code and the failing rank, runs the
same argv inside a container or on a Slurm node, and lets the worker register our callbacks (watchdog,
metrics) through LLaMA-Factory's `run_exp(callbacks=...)`. The rendered YAML stays a plain LLaMA-Factory
input either way. What its launcher would have set for the allocator is set here instead (`allocator_env`).

Stops and restarts (docs/multinode.md, "Preemption, requeue and restarts"): torchrun passes the signals it
handles on to every rank (torch/distributed/elastic/agent/server/api.py: SignalException -> _shutdown(sig));
SIGUSR1, which srun passes on from Slurm's time-limit warning, only with `--signals_to_handle` (torch >= 2.9;
the image pins 2.10). TORCH_ELASTIC_SHUTDOWN_TIMEOUT is how long torchrun then waits before SIGKILL: the
ranks need it to finish their step and save. torch >= 2.12 reads it (pytorch PR 172596); older torch waits
30 s whatever it says, and an env var, unlike a `--shutdown_timeout` flag, does not break them.
`--max_restarts`: torchrun restarts every rank when one dies; the worker resumes from the newest complete
checkpoint of the run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Mapping

from ..hardware.arches import Arch
from ..io.problems import Problem, ProblemReport
from ..recipe import recipe_env, tracking
from ..recipe.recipes import SECRET_ENV, Recipe
from ..run.jobfiles import JOB_DIR

DEVICE_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
# The caching allocator's settings. A ROCm torch reads PYTORCH_CUDA_ALLOC_CONF, then PYTORCH_HIP_ALLOC_CONF (ROCm
# builds only), then PYTORCH_ALLOC_CONF (c10/cuda/CUDAAllocatorConfig.h, `#ifdef USE_ROCM`); torch >= 2.9's generic
# parser (c10/core/AllocatorConfig.cpp) takes PYTORCH_ALLOC_CONF first. One set by the user or the recipe is theirs.
ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
# Passed from the caller's environment when set: caches, offline switches, site network settings, the allocator's.
PASS_THROUGH = (
    "HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
    "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "GLOO_SOCKET_IFNAME", *ALLOC_CONF_VARS,
)
# Not passed: TORCH_EXTENSIONS_DIR, MPLCONFIGDIR (the Makefile's). A local run inherits them with the rest of
# the environment; a container gets caches of its own per image (docker/spec.py OWN_CACHES): compiled code
# must never travel between a container and the host.

# DeepSpeed presets whose optimizer step runs on the CPU (DeepSpeed's CPU Adam, OpenMP-parallel).
CPU_OFFLOAD_PRESETS = ("zero3-offload-optimizer", "zero3-offload")
# torchrun's default set plus SIGUSR1 (what Slurm's `--signal=B:USR1@<grace>` warning becomes).
STOP_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # set for the job, on top of the runtime's base environment; never secret
    unset_env: tuple[str, ...]  # removed from the base environment (device selection is one variable only)
    secret_env: tuple[str, ...]  # names passed from the caller's environment; values never stored
    run_path: str  # relative to the project root (the job's working directory)
    nproc_per_node: int
    nnodes: int
    visible_devices: tuple[str, ...] | None  # GPU indices on the host, None = all of the node's GPUs
    arch: str
    distributed: bool
    max_restarts: int = 0  # torchrun's restarts of the whole group when a rank dies
    stop_grace_s: int = 300  # from a stop signal to SIGKILL: the ranks finish their step and save

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def stop_timeout_s(self) -> int:
        """How long a runtime waits after its stop signal before it kills the job: the grace, plus a moment for
        torchrun, whose own wait for the ranks ends first, to exit."""
        return self.stop_grace_s + (15 if self.distributed else 0)

    def to_json(self) -> str:
        data = asdict(self)
        data["env"] = dict(sorted(self.env.items()))
        return json.dumps(data, indent=2) + "\n"


def parse_gpus(spec: str | None) -> tuple[str, ...] | None:
    if spec is None or str(spec).strip() == "":
        return None
    items = [s.strip() for s in str(spec).split(",") if s.strip()]
    if not items or not all(s.isdigit() for s in items) or len(set(items)) != len(items):
        raise ProblemReport([Problem("", "GPUS", f"`{spec}` is not a list of GPU indices", "e.g. GPUS=0,1")])
    return tuple(items)


def devices_from_env(host_env: Mapping[str, str]) -> tuple[str, ...] | None:
    """A selection the user already made in the shell, taken once; two different variables are refused."""
    present = {name: host_env[name] for name in DEVICE_VARS if host_env.get(name, "").strip()}
    if len(present) > 1:
        listed = ", ".join(f"{k}={v}" for k, v in present.items())
        raise ProblemReport([Problem("", "environment", f"GPU selection set twice ({listed}): ROCm applies both, "
                                     "one after the other, and the job sees the wrong cards",
                                     "unset all but one, or use GPUS=0,1")])
    if present:
        return parse_gpus(next(iter(present.values())))
    return None


def build(
    recipe: Recipe,
    arch: Arch,
    run_path: str,
    host_env: Mapping[str, str],
    *,
    python: str = "python",
    gpus: tuple[str, ...] | None = None,
    node_rank: str = "0",
    master_addr: str | None = None,
    master_port: str | None = None,
    physical_cores: int | None = None,
) -> LaunchPlan:
    """`node_rank`, `master_addr`, `master_port` may be shell placeholders (`$SLURM_NODEID`) for multi-node.
    `physical_cores`: of the node the job runs on (host.physical_cores()), for the CPU-offload presets' threads."""
    nproc, nnodes = recipe.gpus_per_node, recipe.nodes
    if gpus is not None and arch.is_gpu and len(gpus) != nproc:
        raise ProblemReport([Problem("", "GPUS", f"{len(gpus)} GPUs selected but the recipe runs {nproc} per node",
                                     f"add SET=gpus_per_node={len(gpus)} or select {nproc} GPUs")])
    distributed = nproc * nnodes > 1 or recipe.deepspeed != "none"
    restarts, grace = int(recipe.resilience["max_restarts"]), int(recipe.resilience["stop_grace_s"])
    worker = ("-m", "rocmft.worker", "--run-dir", run_path)
    faults = ("--max_restarts", str(restarts), "--signals_to_handle", STOP_SIGNALS)
    if not distributed:
        argv = (python, "-u", *worker)
    elif nnodes == 1 and master_addr is None:
        # --standalone: a private c10d store on a free port, so two jobs on one host never collide.
        argv = (python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc_per_node", str(nproc), *faults, *worker)
    else:
        # Static rendezvous: rank 0 is deterministically the first node (c10d may pick either).
        argv = (python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node_rank", node_rank,
                "--nproc_per_node", str(nproc), "--master_addr", master_addr or "127.0.0.1",
                "--master_port", master_port or "29500", *faults, *worker)

    env, unset, secrets = _environment(arch, host_env, gpus, nnodes, nproc)
    secrets = (*secrets, *(n for n in recipe.secrets if host_env.get(n) and n not in secrets))
    # A recipe that redirects a service's address gets no token for it: neither passed by name nor left in
    # the base environment a local or Slurm job inherits (recipe_env).
    withheld = recipe_env.withheld(recipe.env, (*SECRET_ENV, *recipe.secrets))
    secrets = tuple(n for n in secrets if n not in withheld)
    unset = (*unset, *(n for n in withheld if n not in unset))
    if arch.is_gpu and recipe.deepspeed in CPU_OFFLOAD_PRESETS and physical_cores:
        # torchrun sets OMP_NUM_THREADS=1 for every rank unless it is set (torch/distributed/run.py), so DeepSpeed's
        # CPU Adam would step each rank's share (~0.95 B parameters per rank for an 8B model on 8 GPUs) on one core.
        # The node's physical cores split between its ranks (SMT siblings share a core's AVX units: no gain).
        # Cost: the ranks' data loaders and tokenizers share those cores too. A recipe's `env:` overrides it.
        env["OMP_NUM_THREADS"] = str(max(1, physical_cores // nproc))
    # report_to's trackers write into the run's job folder (recipe/tracking.py); a recipe's `env:` still decides.
    trackers = tracking.names(recipe.llamafactory.get("report_to"), arch.image_packages)
    tracked, by_name = tracking.environment(trackers, f"{run_path}/{JOB_DIR}", host_env)
    env.update(tracked)
    secrets = (*secrets, *(n for n in by_name if n not in secrets and n not in recipe.env))
    env.update(recipe.env)
    env.update(allocator_env(arch, env))
    env.update({
        "PYTHONUNBUFFERED": "1",  # logs stream line by line, through pipes and container logs alike
        "OPTIM_TORCH": "0",  # if this env is reused with llamafactory-cli, it keeps our allocator settings
        "ROCMFT_RUN_DIR": run_path,
    })
    if distributed:
        env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = str(grace)
    if restarts and "--standalone" in argv:
        # torch >= 2.5's c10d rendezvous shares its TCPStore with the ranks, unprefixed per restart: a
        # restarted group can read the dead group's gloo/NCCL addresses and fail with "Connection refused"
        # (seen here under load: test_faults_cpu; pytorch/pytorch#135712, #167288). Opting out gives each
        # round a fresh store on rank 0. The static rendezvous (multi-node) has no such switch.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    return LaunchPlan(
        argv=argv, env=env, unset_env=unset, secret_env=secrets, run_path=run_path,
        nproc_per_node=nproc, nnodes=nnodes, visible_devices=gpus, arch=arch.name, distributed=distributed,
        max_restarts=restarts if distributed else 0, stop_grace_s=grace,
    )


def allocator_env(arch: Arch, env: Mapping[str, str]) -> dict[str, str]:
    """The allocator setting LLaMA-Factory's launcher would have given the job, where nothing else set one.

    LLaMA-Factory 0.9.5 (launcher.py) sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the runs its CLI
    starts through torchrun ("optimize DDP"), unless OPTIM_TORCH=0; this plan calls torchrun itself, so its jobs
    never got it. Why it matters: packed rows and padded batches change shape every step, and a caching allocator
    of fixed-size segments fragments on them (PyTorch's "CUDA semantics" notes, expandable_segments); the same
    holds for one GPU, so every GPU job gets it, a CPU one not (the CPU allocator reads none of these). The HIP
    name, which only ROCm builds read and after PYTORCH_CUDA_ALLOC_CONF, so any setting of the user's or the
    recipe's (ALLOC_CONF_VARS, passed through) wins: `SET=env.PYTORCH_HIP_ALLOC_CONF=expandable_segments:False`.
    Cost: not measured here (no ROCm GPU). ROCm support for expandable segments landed in PyTorch 2.11
    (pytorch#173330, relanded as #177974; ROCm/pytorch#3001, the pick for release/2.10, was closed unmerged): on
    the image's torch 2.10 it is likely a no-op that prints "expandable_segments not supported on this platform"
    once per rank. pytorch#187343 reports a crash with it on ROCm that AMD could not reproduce."""
    if not arch.is_gpu or any(name in env for name in ALLOC_CONF_VARS):
        return {}
    return {"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"}


def _environment(arch: Arch, host_env: Mapping[str, str], gpus: tuple[str, ...] | None,
                 nnodes: int = 1, nproc: int = 0) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """(env to set, names to unset, secret names) for any process on this arch: a job or a debugging shell."""
    env = {name: host_env[name] for name in PASS_THROUGH if host_env.get(name)}
    env.update(arch.env)
    # AMD's NCCL_MIN_NCHANNELS=112 is for one full 8-GPU MI300X node; partial and multi-node runs keep RCCL's own.
    if nnodes == 1 and nproc == arch.gpus_per_node:
        env.update(arch.full_node_env)
    if nnodes > 1:
        env.update(arch.rccl_env)
    unset = [v for v in DEVICE_VARS if v != "ROCR_VISIBLE_DEVICES"] if arch.is_gpu else list(DEVICE_VARS)
    if arch.is_gpu and gpus is not None:
        env["ROCR_VISIBLE_DEVICES"] = ",".join(gpus)
    elif arch.is_gpu:
        unset.append("ROCR_VISIBLE_DEVICES")
    secrets = tuple(name for name in SECRET_ENV if host_env.get(name))
    return env, tuple(unset), secrets


def shell(arch: Arch, host_env: Mapping[str, str], gpus: tuple[str, ...] | None,
          argv: tuple[str, ...] = ("bash",)) -> LaunchPlan:
    """`make shell`: the environment and devices of a job on this arch, running `argv` instead of training."""
    env, unset, secrets = _environment(arch, host_env, gpus)
    env.update(allocator_env(arch, env))
    return LaunchPlan(argv=argv, env=env, unset_env=unset, secret_env=secrets, run_path="",
                      nproc_per_node=len(gpus) if gpus else 1, nnodes=1, visible_devices=gpus,
                      arch=arch.name, distributed=False)


def job_env(plan: LaunchPlan, base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment a runtime hands the job: its base env, minus unset names, plus the plan's."""
    env = {k: v for k, v in base_env.items() if k not in plan.unset_env}
    env.update(plan.env)
    return env
