"""RUNTIME=slurm: the launch plan as an sbatch script in the run dir, submitted with `sbatch`.

The project schedules nothing itself: Slurm allocates the nodes, `srun --kill-on-bad-exit=1` starts one
task per node, torchrun on each node starts that node's ranks, and RCCL/gloo do the rest.

Rendezvous (one way, on purpose): the plan's STATIC torchrun rendezvous with `--node_rank $SLURM_NODEID`
and the first node of the allocation as master (its NodeAddr from `scontrol show node`), port
20000 + job id % 20000. Static, not c10d, because with c10d global rank 0 may land on any node, and rank 0
is the one that writes the adapter, the logs and the checkpoint metadata: with static rendezvous the first
node is always rank 0. LLaMA-Factory's own NNODES/NODE_RANK/MASTER_ADDR route is not used: it goes through
llamafactory-cli, which turns every failure into exit 1 (see plan.py).

The plan's argv is the only argv: the script only wraps it (in `apptainer exec`, `docker run` or nothing)
and quotes it, leaving `$SLURM_NODEID`, `$MASTER_ADDR`, `$MASTER_PORT` for each node's shell to expand.
Secrets are never written into the script: sbatch's `--export=ALL` hands the submitting shell's
environment (HF_TOKEN, ...) to the job.

Bookkeeping: the script records `running` and how the run ended in <run>/status.json itself
(`python -m rocmft.launch.slurm started|ended`), so a run submitted without waiting still ends with the
same status, summary and exit code as a local run; `--wait` also streams train.log to the terminal and
returns the job's exit code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .. import __version__, paths, recipes, runs
from ..arches import Arch
from ..problems import Problem, ProblemReport, raise_if_errors
from ..recipes import Recipe
from .plan import DEVICE_VARS, LaunchPlan

CONTAINERS = ("apptainer", "docker", "none")
DEFAULT_TIME = "00:30:00"
SCRIPT = "sbatch.sh"
TEMPLATE = "sbatch.sh.j2"
# Plan placeholders -> what each node's shell expands (quoted: a value is one argument whatever it holds).
PLACEHOLDERS = {
    "$SLURM_NODEID": '"${SLURM_NODEID}"',
    "$MASTER_ADDR": '"${MASTER_ADDR}"',
    "$MASTER_PORT": '"${MASTER_PORT}"',
}
# Slurm's time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")
# Filesystem types (as /proc/mounts names them) that every node of a cluster can mount, and ones that are
# local to one machine. A pragmatic list: a type in neither set is not judged.
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "ceph", "cephfs", "glusterfs", "fuse.glusterfs", "fuse.ceph-fuse",
    "cifs", "smb3", "smbfs", "wekafs", "fuse.wekafs", "orangefs", "pvfs2", "panfs", "afs", "fuse.juicefs",
    "fuse.sshfs", "virtiofs", "9p",
})
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "ramfs", "overlay", "vfat",
                      "squashfs", "devtmpfs"})
BATCH_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps")
LF_BATCH_DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}  # transformers' defaults


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time: str = DEFAULT_TIME
    container: str = "none"
    sif: str | None = None  # apptainer image file (CONTAINER=apptainer)
    image: str | None = None  # docker image (CONTAINER=docker)
    sbatch_args: tuple[str, ...] = ()  # extra #SBATCH lines, e.g. --qos=high --constraint=mi300x


# ---------------------------------------------------------------- command-line options

def _add_once(parser, *names: str, **kwargs) -> None:
    """slurm.py and k8s.py share a few options; every runtime's options land on the same parser."""
    if any(name in parser._option_string_actions for name in names):  # argparse has no public lookup
        return
    parser.add_argument(*names, **kwargs)


def add_shared_arguments(parser) -> None:
    _add_once(parser, "--no-submit", dest="submit", action="store_false", default=True,
              help="slurm/k8s: only render the sbatch script / PyTorchJob into the run dir (SUBMIT=0)")
    _add_once(parser, "--container-image", dest="container_image", default=None,
              help="slurm (CONTAINER=docker) / k8s: the image to run (default: rocmft:<version>-<arch>)")
    _add_once(parser, "--time", dest="time_limit", default=None,
              help=f"slurm: job time limit (Slurm format, default {DEFAULT_TIME}); k8s: activeDeadlineSeconds")


def add_arguments(parser) -> None:
    add_shared_arguments(parser)
    _add_once(parser, "--partition", default=None, help="slurm: partition (PARTITION=)")
    _add_once(parser, "--account", default=None, help="slurm: account to charge (ACCOUNT=)")
    _add_once(parser, "--container", default=None,
              help="slurm: apptainer | docker | none (default: apptainer for GPU arches, none for cpu)")
    _add_once(parser, "--sif", default=None, help="slurm: the Apptainer image (default: rocmft-<arch>.sif in the project root)")
    _add_once(parser, "--sbatch-args", dest="sbatch_args", default="",
              help='slurm: extra sbatch options, one string (SBATCH_ARGS="--qos=high --constraint=mi300x")')
    _add_once(parser, "--wait", action="store_true",
              help="slurm: wait for the job (sbatch --wait), stream train.log, return its exit code (WAIT=1)")


def default_container(arch: Arch) -> str:
    # AMD HPC centres run containers through Apptainer; the CPU arch is for tests on bare metal.
    return "apptainer" if arch.is_gpu else "none"


def default_sif(arch: str, root: Path) -> str:
    return str(root / f"rocmft-{arch}.sif")


def default_image(arch: str) -> str:
    try:
        from ..image.plan import tags

        return tags(arch)[0]
    except ImportError:  # the image package is optional for rendering
        return f"rocmft:{__version__}-{arch}"


def options_from_args(args, arch: Arch, root: Path) -> SlurmOptions:
    problems: list[Problem] = []
    container = (getattr(args, "container", None) or default_container(arch)).strip().lower()
    if container not in CONTAINERS:
        problems.append(Problem("", "CONTAINER", f"unknown container mode `{container}`", f"one of: {', '.join(CONTAINERS)}"))
    time_limit = str(getattr(args, "time_limit", None) or DEFAULT_TIME).strip()
    if not _TIME.match(time_limit):
        problems.append(Problem("", "TIME", f"`{time_limit}` is not a Slurm time limit",
                                "e.g. TIME=00:30:00 (hours:minutes:seconds), TIME=90 (minutes) or TIME=1-00:00:00 (days-hours); "
                                "every job gets one, so a mistake cannot hang the queue"))
    try:
        extra = tuple(shlex.split(getattr(args, "sbatch_args", "") or ""))
    except ValueError as exc:
        problems.append(Problem("", "SBATCH_ARGS", f"cannot split: {exc}"))
        extra = ()
    for item in extra:
        if not item.startswith("-"):
            problems.append(Problem("", "SBATCH_ARGS", f"`{item}` is not an sbatch option", "e.g. --qos=high (one string, options only)"))
    raise_if_errors(problems)
    return SlurmOptions(
        partition=getattr(args, "partition", None) or None,
        account=getattr(args, "account", None) or None,
        time=time_limit,
        container=container,
        sif=getattr(args, "sif", None) or (default_sif(arch.name, root) if container == "apptainer" else None),
        image=getattr(args, "container_image", None) or (default_image(arch.name) if container == "docker" else None),
        sbatch_args=extra,
    )


# ---------------------------------------------------------------- rendering (pure)

def shell_argv(argv: Iterable[str]) -> str:
    """The plan's argv as one shell line: every word quoted, the rendezvous placeholders left to the node."""
    return " ".join(PLACEHOLDERS.get(a) or shlex.quote(a) for a in argv)


def _quote(word: str) -> str:
    """Quote a word for the shell, except the `$(...)`/`${...}` the node's shell must expand (kept in "")."""
    return f'"{word}"' if ("${" in word or "$(" in word) else shlex.quote(word)


def bind_paths(root: Path, run_dir: Path, env: Mapping[str, str]) -> list[str]:
    """What a container must see at the same path: the project, plus a runs dir or HF cache outside it."""
    binds = [str(root)]
    candidates = [run_dir.parent] + [Path(env[k]) for k in ("HF_HOME", "HF_HUB_CACHE") if env.get(k)]
    for path in candidates:
        path = Path(os.path.abspath(path))
        if not any(path == Path(b) or Path(b) in path.parents for b in binds):
            binds.append(str(path))
    return binds


def container_prefix(opts: SlurmOptions, arch: Arch, binds: list[str], root: Path, env_names: Iterable[str],
                     *, job: bool) -> list[str]:
    """The words before the plan's argv. `job`: the training task (GPUs, network) vs. a bookkeeping call."""
    if opts.container == "apptainer":
        words = ["apptainer", "exec"]
        if arch.is_gpu and job:
            words.append("--rocm")  # binds the host's /dev/kfd, /dev/dri and ROCm user-space libraries
        for path in binds:
            words += ["--bind", f"{path}:{path}"]
        return words + ["--pwd", str(root), str(opts.sif)]
    if opts.container == "docker":
        # As the submitting user: files in the run dir stay theirs, and NFS with root_squash stays writable.
        words = ["docker", "run", "--rm", "--init", "--user", "$(id -u):$(id -g)"]
        if job:
            words += ["--network=host", "--ipc=host"]
            if arch.is_gpu:
                words += ["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video",
                          "--security-opt", "seccomp=unconfined"]
            for name in env_names:
                words += ["-e", name]  # the value comes from the task's environment, never from this file
        else:
            # bookkeeping needs no GPU (skip the image's device check) but the job's id and nodes
            words += ["-e", "ROCMFT_SKIP_GPU_CHECK=1", "-e", "SLURM_JOB_ID", "-e", "SLURM_JOB_NODELIST"]
        for path in binds:
            words += ["-v", f"{path}:{path}"]
        return words + ["-w", str(root), str(opts.image)]
    return []


def node_command(plan: LaunchPlan, opts: SlurmOptions, arch: Arch, binds: list[str], root: Path) -> str:
    """What one node's task runs (in `bash -c`): the plan's argv, wrapped for the container mode."""
    env_names = sorted({*plan.env, *plan.secret_env})
    parts = [f'echo "[rocmft] node ${{SLURM_NODEID}} (${{SLURMD_NODENAME}}): {plan.nproc_per_node} '
             f'process{"es" if plan.nproc_per_node != 1 else ""}"']
    if arch.is_gpu:
        # Slurm's GPU plugin may set several selection variables; ROCm applies them one after the other.
        # Keep the one ROCr reads and drop the others (see plan.DEVICE_VARS).
        others = " ".join(v for v in (*DEVICE_VARS, "GPU_DEVICE_ORDINAL") if v != "ROCR_VISIBLE_DEVICES")
        parts.append(f'if [[ -n "${{ROCR_VISIBLE_DEVICES:-}}" ]]; then unset {others}; fi')
    prefix = container_prefix(opts, arch, binds, root, env_names, job=True)
    if opts.container == "docker":
        # The container gets the task's name so a cancelled job's container can be found (docker ps).
        prefix = prefix[:4] + ["--name", "rocmft-${SLURM_JOB_ID}-${SLURM_NODEID}"] + prefix[4:]
        if arch.is_gpu:
            parts.append("ib=(); [[ -e /dev/infiniband ]] && ib=(--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1)")
    words = [_quote(w) for w in prefix]
    if opts.container == "docker" and arch.is_gpu:
        words.insert(words.index("-w"), '"${ib[@]}"')
    parts.append(" ".join(["exec", *words, shell_argv(plan.argv)]))
    return "; ".join(parts)


def directives(recipe: Recipe, arch: Arch, opts: SlurmOptions, run_dir: Path, root: Path) -> list[str]:
    lines = [f"--job-name=rocmft-{recipe.name}", f"--nodes={recipe.nodes}", "--ntasks-per-node=1"]
    if arch.is_gpu:
        lines.append(f"--gres=gpu:{recipe.gpus_per_node}")
        if recipe.gpus_per_node >= arch.gpus_per_node:
            lines += ["--exclusive", "--mem=0"]  # whole nodes: every CPU and all host memory for the ranks
        # part of a node: the site's CPUs-per-GPU default applies (SBATCH_ARGS=--cpus-per-task=N to choose)
    else:
        lines.append(f"--cpus-per-task={recipe.gpus_per_node}")  # cpu arch: one CPU per training process
    lines.append(f"--time={opts.time}")
    if opts.partition:
        lines.append(f"--partition={opts.partition}")
    if opts.account:
        lines.append(f"--account={opts.account}")
    lines += [f"--chdir={root}", f"--output={run_dir}/train.log", "--open-mode=append", "--export=ALL"]
    lines += list(opts.sbatch_args)
    return lines


def srun_flags() -> list[str]:
    # One task per node holding every CPU the job got there: Slurm 22.05 stopped passing sbatch's
    # --cpus-per-task on to srun, and a 1-CPU task would pin all of torchrun's ranks to one core.
    return ["--kill-on-bad-exit=1", '--nodes="${SLURM_JOB_NUM_NODES}"', '--ntasks="${SLURM_JOB_NUM_NODES}"',
            "--ntasks-per-node=1", '--cpus-per-task="${SLURM_CPUS_ON_NODE}"']


def bookkeeping_command(opts: SlurmOptions, arch: Arch, binds: list[str], root: Path, python: str) -> str:
    prefix = container_prefix(opts, arch, binds, root, (), job=False)
    py = python if opts.container == "none" else "python"
    return " ".join(_quote(w) for w in [*prefix, py, "-m", "rocmft.launch.slurm"])


def render_script(plan: LaunchPlan, recipe: Recipe, arch: Arch, opts: SlurmOptions, *, root: Path, run_dir: Path,
                  python: str) -> str:
    """The sbatch script: pure (same inputs, same bytes), so tests pin it."""
    from ..render import environment

    binds = bind_paths(root, run_dir, plan.env)
    exports = [(k, shlex.quote(v)) for k, v in sorted(plan.env.items())]
    if opts.container == "none":
        # the venv's bin first: what the job runs by name (ninja for DeepSpeed's JIT ops) is the venv's
        exports.append(("PATH", f'{shlex.quote(str(Path(python).parent))}:"$PATH"'))
    names = ", ".join(plan.secret_env) if plan.secret_env else "HF_TOKEN and the like"
    secrets_note = f"{names}: passed from the submitting shell (sbatch --export=ALL)"
    run_rel = os.path.relpath(run_dir, root) if run_dir.is_relative_to(root) else str(run_dir)
    return environment().get_template(TEMPLATE).render(
        version=__version__, recipe=recipe.name, arch=arch.name, nodes=recipe.nodes, nproc=plan.nproc_per_node,
        container=opts.container if opts.container != "none" else "none (bare metal)",
        script_path=f"{run_rel}/{SCRIPT}", run_path=run_rel,
        directives=directives(recipe, arch, opts, run_dir, root),
        root_q=shlex.quote(str(root)), run_dir_q=shlex.quote(str(run_dir)),
        exports=exports, unset=list(plan.unset_env), secrets_note=secrets_note,
        book=bookkeeping_command(opts, arch, binds, root, python),
        node_cmd_q=shlex.quote(node_command(plan, opts, arch, binds, root)),
        srun_flags=srun_flags(),
    )


# ---------------------------------------------------------------- checks before anything is submitted

def user_batch_overrides(overrides: Iterable[str]) -> set[str]:
    """The batch keys the user set on the command line (SET=...): an explicit choice is never second-guessed."""
    found = set()
    for item in overrides:
        key = item.partition("=")[0].strip()
        last = key.split(".")[-1]
        if last in BATCH_KEYS:
            found.add(last)
    return found


def _batch(recipe: Recipe) -> tuple[int, int]:
    lf = recipe.llamafactory
    return (int(lf.get("per_device_train_batch_size", LF_BATCH_DEFAULTS["per_device_train_batch_size"])),
            int(lf.get("gradient_accumulation_steps", LF_BATCH_DEFAULTS["gradient_accumulation_steps"])))


def layout_text(recipe: Recipe) -> str:
    unit = "process" if recipe.arch == "cpu" else "GPU"
    n = recipe.gpus_per_node
    return f"{recipe.nodes} node{'s' if recipe.nodes != 1 else ''} x {n} {unit}{('es' if unit == 'process' else 's') if n != 1 else ''}"


def batch_problems(recipe: Recipe, written: Recipe, pinned: set[str]) -> list[Problem]:
    """The global batch across nodes x GPUs, judged against the one the recipe file was written for.

    A recipe's global batch (per_device x grad_accum x GPUs x nodes, as its file says) is what its learning
    rate was tuned for. Moving it to another node count keeps per-device settings, so the global batch
    silently scales. Refused when the recipe's batch cannot be split evenly over the new world size at all
    (no per_device x grad_accum gives it back); a warning with the exact SET= when it can be kept. Setting
    per_device_train_batch_size / gradient_accumulation_steps on the command line states the batch you want.
    """
    world, written_world = recipe.world_size, written.world_size
    if world == written_world or pinned:
        return []
    per_device, accum = _batch(recipe)
    w_per_device, w_accum = _batch(written)
    target = w_per_device * w_accum * written_world
    now = per_device * accum * world
    if now == target:
        return []
    layout = layout_text(recipe)
    if target % world:
        divides = [n for n in range(1, 65) if target % (n * recipe.gpus_per_node) == 0][:6]
        hint = f"NODES={' or '.join(map(str, divides))} keep it" if divides else "no node count keeps it"
        return [Problem(recipe.path, "global batch",
                        f"the recipe's global batch {target} ({w_per_device} per device x {w_accum} accumulation x "
                        f"{written_world} GPUs) does not divide across {layout} = {world} processes",
                        f"{hint}; or state the batch you want with SET=\"per_device_train_batch_size=P gradient_accumulation_steps=A\" "
                        f"(global batch P x A x {world})")]
    per_rank = target // world
    keep_pd = max(d for d in range(1, per_device + 1) if per_rank % d == 0)
    keep = f"per_device_train_batch_size={keep_pd} gradient_accumulation_steps={per_rank // keep_pd}"
    return [Problem(recipe.path, "global batch",
                    f"the global batch grows from {target} (as the recipe was written) to {now} on {layout}: "
                    "its learning rate was tuned for the smaller one",
                    f"to keep {target}: SET=\"{keep}\"", severity="warning")]


def checkpoint_world_size(checkpoint: Path) -> tuple[int | None, bool]:
    """(data-parallel ranks that wrote the DeepSpeed ZeRO shards, universal?) of an HF Trainer checkpoint."""
    latest = checkpoint / "latest"
    tag = latest.read_text().strip() if latest.is_file() else None
    folders = [checkpoint / tag] if tag and (checkpoint / tag).is_dir() else sorted(checkpoint.glob("global_step*"))
    for folder in folders:
        if (folder / "zero").is_dir() and folder.name.endswith("_universal"):
            return None, True
        ranks = set()
        for f in folder.glob("*zero_pp_rank_*_mp_rank_*_optim_states.pt"):
            match = re.search(r"zero_pp_rank_(\d+)_", f.name)
            if match:
                ranks.add(int(match.group(1)))
        if ranks:
            return len(ranks), False
    return None, False


def resume_problems(recipe: Recipe, resume_from: str | None, root: Path) -> list[Problem]:
    """Resuming on a different node count: fine for plain DDP (LoRA), refused for sharded DeepSpeed state."""
    if not resume_from:
        return []
    checkpoint = Path(resume_from)
    checkpoint = checkpoint if checkpoint.is_absolute() else root / checkpoint
    old_run = checkpoint.parent.parent
    saved, universal = checkpoint_world_size(checkpoint)
    if universal:
        return [Problem("", "RESUME", f"{resume_from} holds a DeepSpeed universal checkpoint: it loads on any world size "
                        "only with \"checkpoint\": {\"load_universal\": true} in the DeepSpeed config", severity="note")]
    old_world, old_ds = saved, None
    try:
        plan = json.loads((old_run / "plan.json").read_text())
        old_world = old_world or int(plan["nproc_per_node"]) * int(plan["nnodes"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        resolved = recipes.parse_yaml((old_run / "recipe.resolved.yaml").read_text()) or {}
        old_ds = resolved.get("deepspeed")
        old_world = old_world or int(resolved["gpus_per_node"]) * int(resolved["nodes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if old_world is None or old_world == recipe.world_size:
        return []
    sharded = saved is not None or (old_ds not in (None, "none") and recipe.deepspeed != "none")
    if sharded:
        return [Problem("", "RESUME",
                        f"{resume_from} was saved by {old_world} DeepSpeed ranks and this run has {recipe.world_size} "
                        f"({layout_text(recipe)}): ZeRO optimizer shards only load on the same "
                        "world size",
                        f"resume with the old layout (NODES/gpus_per_node giving {old_world} ranks), or convert the "
                        "checkpoint to a DeepSpeed universal checkpoint first (docs/multinode.md, "
                        "\"Resume on a different node count\")")]
    return [Problem("", "RESUME", f"resuming a {old_world}-process checkpoint on {recipe.world_size} processes: "
                    "the optimizer state is complete (no DeepSpeed shards); the data order differs from an "
                    "uninterrupted run", severity="note")]


def mount_fstype(path: Path, mounts_text: str | None = None) -> tuple[str, str] | None:
    """(mount point, filesystem type) holding `path` (its nearest existing folder), from /proc/mounts."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    path = Path(os.path.abspath(path))
    existing, tail = path, []
    while not existing.exists() and existing != existing.parent:  # the run dir is not created yet
        tail.insert(0, existing.name)
        existing = existing.parent
    path = existing.resolve().joinpath(*tail)  # symlinks resolved where they exist
    best: tuple[str, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        if (path == Path(point) or Path(point) in path.parents) and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return best


def shared_fs_problems(recipe: Recipe, run_dir: Path, mounts_text: str | None = None) -> list[Problem]:
    if recipe.nodes < 2:
        return []
    found = mount_fstype(run_dir, mounts_text)
    if not found or found[1] in SHARED_FS or found[1] not in LOCAL_FS:
        return []  # shared, or a type this list does not know: not judged
    point, fstype = found
    return [Problem("", "run dir",
                    f"{runs.relative(run_dir)} is on {fstype} at {point}, usually local to one machine: the other "
                    "nodes would not see the recipe, model and data, checkpoints would be saved by node 0 only "
                    "(other nodes' DeepSpeed shards on their own disks) and the dataset cache would not be shared",
                    "put the project (or ROCMFT_RUNS) on NFS, Lustre, GPFS, BeeGFS or CephFS; ignore this when "
                    "every node mounts this path (judged from the filesystem type only)", severity="warning")]


def submit_problems(opts: SlurmOptions, submit: bool, which: Callable[[str], str | None] = shutil.which) -> list[Problem]:
    problems: list[Problem] = []
    if submit and not which("sbatch"):
        problems.append(Problem("", "RUNTIME=slurm", "sbatch not found on PATH: this machine is not a Slurm submit host",
                                "run on the cluster's login node, install the Slurm client (Debian/Ubuntu: apt-get install "
                                "slurm-client), or SUBMIT=0 to only render the script into the run dir"))
    if opts.container == "apptainer" and opts.sif and not Path(opts.sif).is_file():
        problems.append(Problem("", "CONTAINER=apptainer", f"no Apptainer image at {opts.sif}",
                                "build it where apptainer and the Docker image are: `make sif ARCH=<arch>`, or give SIF=<path>",
                                severity="error" if submit else "warning"))
    return problems


def preflight(prep, args, opts: SlurmOptions, *, submit: bool, root: Path,
              which: Callable[[str], str | None] = shutil.which, mounts_text: str | None = None) -> list[Problem]:
    """Every check before the run dir exists. Errors raise together; warnings are returned to print."""
    from ..cli.common import overrides

    problems: list[Problem] = []
    if getattr(args, "gpus", None):
        problems.append(Problem("", "GPUS", "GPUS= picks cards on this machine; on Slurm the allocation decides",
                                "use SET=gpus_per_node=N (sbatch asks for N GPUs per node)"))
    problems += submit_problems(opts, submit, which)
    written = recipes.load(prep.recipe.path)
    problems += batch_problems(prep.recipe, written, user_batch_overrides(overrides(args)))
    problems += resume_problems(prep.recipe, prep.resume_from, root)
    problems += shared_fs_problems(prep.recipe, prep.run_dir, mounts_text)
    return raise_if_errors(problems)


# ---------------------------------------------------------------- submitting

def slurm_verdict(script: str, root: Path) -> None:
    """`sbatch --test-only`: Slurm's own verdict on partition, account, limits, shown verbatim, before any run dir."""
    try:
        proc = subprocess.run(["sbatch", "--test-only"], input=script, text=True, capture_output=True, cwd=root,
                              timeout=60, check=False)
    except subprocess.TimeoutExpired:
        print("warning: sbatch --test-only did not answer within 60 s; submitting without Slurm's pre-check",
              file=sys.stderr, flush=True)
        return
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip() or f"sbatch --test-only exited {proc.returncode}"
        raise ProblemReport([Problem("", "sbatch", f"Slurm refused the job: {message}",
                                     "check PARTITION= / ACCOUNT= / TIME= against `sinfo` and `sacctmgr show assoc user=$USER`")])


def _follow(path: Path, stop: threading.Event, out) -> None:
    """Print what the job appends to train.log until `stop` is set and the file is drained."""
    from .progress import ProgressParser

    parser = ProgressParser()
    handle = None
    pending = b""
    while True:
        if handle is None and path.is_file():
            handle = open(path, "rb")  # noqa: SIM115 - closed below
        chunk = handle.read(65536) if handle else b""
        if chunk or (stop.is_set() and pending):
            pending += chunk
            # whole lines only: a progress line never lands inside a line or a multi-byte character
            cut = len(pending) if not chunk else max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
            if cut <= 0:
                continue
            done, pending = pending[:cut], pending[cut:]
            out.buffer.write(done)
            out.flush()
            progress = parser.feed(done.decode("utf-8", "replace"))
            if progress:
                print(f"[rocmft] {progress.line()}", file=out, flush=True)
            continue
        if stop.is_set():
            break
        time.sleep(0.3)
    if handle:
        handle.close()


def submit(script_path: Path, run_dir: Path, arch_name: str, root: Path, *, wait: bool) -> int:
    cmd = ["sbatch", "--parsable"] + (["--wait"] if wait else []) + [str(script_path)]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip()
    job_id = first.split(";")[0] if first[:1].isdigit() else None
    if job_id is None:
        _, err = proc.communicate()
        message = (err or first).strip() or f"sbatch exited {proc.returncode}"
        runs.mark(run_dir, "failed", runtime="slurm", exit_code=proc.returncode or 1, error=message)
        raise ProblemReport([Problem("", "sbatch", f"Slurm refused the job: {message}",
                                     f"the script is in {runs.relative(script_path)}; fix and `sbatch` it, or run again")])
    # status.json is the job's to write from here on (it records its id when it starts): writing it here too
    # could race with a job that starts at once.
    rel = runs.relative(run_dir)
    print(f"[rocmft] submitted slurm job {job_id}: {rel}", flush=True)
    print(f"[rocmft] follow: tail -f {rel}/train.log   status: squeue -j {job_id}   cancel: scancel {job_id}", flush=True)
    if not wait:
        proc.stdout.close()
        proc.wait()
        print(f"[rocmft] when it ends, {rel}/status.json and `make runs` say how (the job records it itself)", flush=True)
        return 0

    stop = threading.Event()
    follower = threading.Thread(target=_follow, args=(run_dir / "train.log", stop, sys.stdout), daemon=True)
    follower.start()
    interrupted: list[int] = []

    def cancel(signum, _frame):
        interrupted.append(signum)
        print(f"\n[rocmft] cancelling slurm job {job_id}", flush=True)
        subprocess.run(["scancel", job_id], check=False)

    previous = {s: signal.signal(s, cancel) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _, err = proc.communicate()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        stop.set()
        follower.join(timeout=10)
    code = proc.returncode
    if err.strip():
        print(err.strip(), file=sys.stderr, flush=True)
    if interrupted:
        runs.mark(run_dir, "interrupted", exit_code=128 + interrupted[0], job_id=job_id)
        print(f"[rocmft] interrupted: slurm job {job_id} cancelled, {rel} marked interrupted", flush=True)
        return 128 + interrupted[0]
    status = runs.read_status(run_dir)
    if status.get("state") in ("succeeded", "failed", "diverged") and status.get("job_id") == job_id:
        return int(status.get("exit_code", code))  # the job recorded how it ended (and printed it into train.log)
    return _finish(run_dir, code, arch_name)  # killed before it could record (time limit, scancel, node failure)


def launch(prep, args) -> int:
    """`rocmft train --runtime slurm`: check, render <run>/sbatch.sh, submit it (unless --no-submit)."""
    from .. import pipeline
    from ..cli.common import warn

    root = paths.root()
    opts = options_from_args(args, prep.arch, root)
    want_submit = getattr(args, "submit", True)
    warn(preflight(prep, args, opts, submit=want_submit, root=root))
    python = sys.executable if opts.container == "none" else "python"
    prep = dataclasses.replace(prep, gpus=None)  # Slurm's allocation selects the GPUs, not this shell
    plan = pipeline.build_plan(prep, python=python, node_rank="$SLURM_NODEID", master_addr="$MASTER_ADDR",
                               master_port="$MASTER_PORT")
    run_dir = Path(os.path.abspath(prep.run_dir))
    script = render_script(plan, prep.recipe, prep.arch, opts, root=root, run_dir=run_dir, python=python)
    if want_submit:
        slurm_verdict(script, root)
    pipeline.commit(prep)
    (run_dir / "plan.json").write_text(plan.to_json())
    runs.write_versions(run_dir, image=opts.sif or opts.image,
                        extra={"runtime": "slurm", "container": opts.container, "time_limit": opts.time})
    script_path = run_dir / SCRIPT
    script_path.write_text(script)
    script_path.chmod(0o755)
    rel = runs.relative(run_dir)
    print(f"[rocmft] run dir: {rel}", flush=True)
    print(f"[rocmft] sbatch script: {rel}/{SCRIPT} ({layout_text(prep.recipe)}, container {opts.container}, "
          f"time limit {opts.time})", flush=True)
    if not want_submit:
        print(f"[rocmft] not submitted (SUBMIT=0); submit it from {root} with: sbatch {rel}/{SCRIPT}", flush=True)
        return 0
    return submit(script_path, run_dir, prep.recipe.arch, root, wait=getattr(args, "wait", False))


# ---------------------------------------------------------------- how the job ended

_SRUN_EXIT = re.compile(r"^srun: error: (\S+): tasks? ([\d,\-]+): Exited with exit code (\d+)", re.M)


def root_cause(log_text: str, code: int) -> tuple[int, list[str]]:
    """The exit code that explains a failed job, and which node gave it.

    With --kill-on-bad-exit, srun stops the healthy nodes when one fails and then returns the highest code
    of all tasks: often 143 (SIGTERM) of a node it stopped itself. The first task that EXITED non-zero on
    its own is the cause; its code is the one reported.
    """
    exits = [(node, task, int(c)) for node, task, c in _SRUN_EXIT.findall(log_text) if int(c) != 0]
    if not exits or code == 0:
        return code, []
    node, task, first = exits[0]
    lines = [f"node {node} (task {task}) exited with code {first}"]
    if code != first:
        lines.append(f"srun returned {code}: the other node(s) were stopped by --kill-on-bad-exit")
    return first, lines


def _finish(run_dir: Path, code: int, arch_name: str) -> int:
    from .outcome import finish

    log = run_dir / "train.log"
    cause, lines = root_cause(log.read_text(errors="replace") if log.is_file() else "", code)
    for line in lines:
        print(f"[rocmft] {line}", flush=True)
    return finish(run_dir, cause, arch_name)


# ---------------------------------------------------------------- inside the job: status bookkeeping

def main(argv: list[str] | None = None) -> int:
    """`python -m rocmft.launch.slurm started|ended RUN_DIR [CODE]`: what the sbatch script records."""
    import argparse
    import socket

    parser = argparse.ArgumentParser(prog="python -m rocmft.launch.slurm")
    parser.add_argument("event", choices=("started", "ended"))
    parser.add_argument("run_dir")
    parser.add_argument("code", nargs="?", type=int, default=0)
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    job = {"job_id": os.environ.get("SLURM_JOB_ID"), "nodelist": os.environ.get("SLURM_JOB_NODELIST")}
    if args.event == "started":
        runs.mark(run_dir, "running", runtime="slurm", host=socket.gethostname(), **job)
        return 0
    resolved = recipes.parse_yaml((run_dir / "recipe.resolved.yaml").read_text()) or {}
    _finish(run_dir, args.code, str(resolved.get("arch", "cpu")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
