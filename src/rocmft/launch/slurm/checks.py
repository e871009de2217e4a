"""Problems found before anything is submitted: GPUS=, sbatch and the image, and a run dir on a filesystem
the other nodes cannot see (the global batch and resume across world sizes: rocmft.run.layout, for every runtime)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from ...io.problems import Problem, raise_if_errors
from ...recipe.recipes import Recipe
from ...run import runs
from ...run.layout import (  # noqa: F401 - re-exported: the batch and resume checks moved to rocmft.run.layout
    BATCH_KEYS,
    LF_BATCH_DEFAULTS,
    batch_problems,
    checkpoint_world_size,
    layout_text,
    resume_problems,
    user_batch_overrides,
)
from .options import SlurmOptions, slurm_time, time_seconds, warning_seconds

# Filesystem types (as /proc/mounts names them) that every node of a cluster can mount, and ones that are
# local to one machine. A pragmatic list: a type in neither set is not judged.
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "ceph", "cephfs", "glusterfs", "fuse.glusterfs", "fuse.ceph-fuse",
    "cifs", "smb3", "smbfs", "wekafs", "fuse.wekafs", "orangefs", "pvfs2", "panfs", "afs", "fuse.juicefs",
    "fuse.sshfs", "virtiofs", "9p",
})
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "ramfs", "overlay", "vfat",
                      "squashfs", "devtmpfs"})
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

    problems: list[Problem] = []
    if getattr(args, "gpus", None):
        problems.append(Problem("", "GPUS", "GPUS= picks cards on this machine; on Slurm the allocation decides",
                                "use SET=gpus_per_node=N (sbatch asks for N GPUs per node)"))
    problems += submit_problems(opts, submit, which)
    # (global batch and resume across world sizes: checked for every runtime by pipeline.prepare)
    problems += shared_fs_problems(prep.recipe, prep.run_dir, mounts_text)
    problems += warning_problems(prep.recipe, opts)
    planned = getattr(prep, "planned_time", None)
    if planned is not None:
        problems += time_limit_problems(opts.time, planned.seconds, planned.what, planned.upper_bound,
                                        int(prep.recipe.resilience["max_requeues"]))
    return raise_if_errors(problems)


# A suggested TIME is the plan's slow end rounded up to this: the plan counts the training steps only.
TIME_STEP_S = 15 * 60


def time_limit_problems(time_limit: str, planned_s: tuple[float, float], what: str, upper_bound: bool,
                        max_requeues: int) -> list[Problem]:
    """A warning when the job's time limit is shorter than the planner's time for its training (plan.check, the
    same estimate the plan line of `make train` prints): Slurm would stop it there. `planned_s`: (fast, slow end)."""
    fast, slow = planned_s
    limit = time_seconds(time_limit)
    if slow <= 0 or limit >= slow:
        return []
    bound = "at most " if upper_bound else ""
    planned = f"{bound}{slurm_time(fast)}-{slurm_time(slow)} for {what}" if what else f"{bound}{slurm_time(fast)}-{slurm_time(slow)}"
    verdict = "is shorter than" if limit < fast else "may be shorter than"
    if max_requeues > 0:
        after = (f"Slurm stops it there; it saves and is requeued (resilience.max_requeues={max_requeues}: up to "
                 f"{max_requeues + 1} attempts, each waiting in the queue again)")
    else:
        after = "Slurm stops it there and, with resilience.max_requeues=0, it is not requeued"
    suggested = slurm_time(-(-slow // TIME_STEP_S) * TIME_STEP_S)
    return [Problem("", "TIME", f"TIME={time_limit} {verdict} the planned training time ({planned}): {after}",
                    f"TIME={suggested} or more: the plan counts the training steps only, not loading the model, "
                    "evaluation or saves", severity="warning")]


def warning_problems(recipe: Recipe, opts: SlurmOptions) -> list[Problem]:
    grace = int(recipe.resilience["stop_grace_s"])
    sent = warning_seconds(grace, opts.time)
    if sent >= grace:
        return []
    return [Problem("", "TIME", f"TIME={opts.time} is short for resilience.stop_grace_s={grace}: Slurm warns the job "
                    f"{sent} s before the time limit instead, so that it trains in between (its checkpoint must be "
                    f"saved in those {sent} s)", "a longer TIME, or SET=resilience.stop_grace_s=<seconds>",
                    severity="note")]
