"""Problems found before anything is submitted: GPUS=, sbatch and the image, the global batch across
nodes, resuming on another node count, and a run dir on a filesystem the other nodes cannot see."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable, Iterable

from ... import recipes, runs
from ...problems import Problem, raise_if_errors
from ...recipes import Recipe
from .options import SlurmOptions

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
    from ...cli.common import overrides

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
