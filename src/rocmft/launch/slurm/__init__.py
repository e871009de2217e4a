"""RUNTIME=slurm: the launch plan as an sbatch script in the run dir, submitted with `sbatch`.

The project schedules nothing itself: Slurm allocates the nodes, `srun --kill-on-bad-exit=1` starts one
task per node, torchrun on each node starts that node's ranks, and RCCL/gloo do the rest.

options.py reads the command line, checks.py finds problems before anything is submitted, script.py
renders the script (its docstring explains the rendezvous), submission.py hands it to Slurm and, with
--wait, follows it; status.py is what the job runs to record how it started and ended.

Bookkeeping: the script records `running` and how the run ended in <run>/status.json itself
(`python -m rocmft.launch.slurm started|ended`), so a run submitted without waiting still ends with the
same status, summary and exit code as a local run; `--wait` also streams train.log to the terminal and
returns the job's exit code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil  # noqa: F401 - see recipes below
import subprocess  # noqa: F401 - see recipes below
import sys
from pathlib import Path

# Tests patch and call slurm.shutil.which, slurm.subprocess.run and slurm.recipes.load through this
# package, as they did when it was one module: those three stay imported here.
from ...io import paths  # noqa: F401
from ...recipe import recipes  # noqa: F401
from ...run import runs  # noqa: F401
from .checks import (
    BATCH_KEYS,
    LF_BATCH_DEFAULTS,
    LOCAL_FS,
    SHARED_FS,
    batch_problems,
    checkpoint_world_size,
    layout_text,
    mount_fstype,
    preflight,
    resume_problems,
    shared_fs_problems,
    submit_problems,
    user_batch_overrides,
)
from .options import (
    _TIME,  # noqa: F401 - k8s.py shares slurm's time format and option helper
    CONTAINERS,
    DEFAULT_TIME,
    SlurmOptions,
    _add_once,  # noqa: F401
    add_arguments,
    add_shared_arguments,
    default_container,
    default_image,
    default_sif,
    option_problems,
    options_from_args,
)
from .script import (
    PLACEHOLDERS,
    SCRIPT,
    TEMPLATE,
    bind_paths,
    bookkeeping_command,
    container_prefix,
    directives,
    node_command,
    render_script,
    shell_argv,
    srun_flags,
)
from .status import main, root_cause
from .submission import slurm_verdict, submit

__all__ = [
    "BATCH_KEYS", "CONTAINERS", "DEFAULT_TIME", "LF_BATCH_DEFAULTS", "LOCAL_FS", "PLACEHOLDERS", "SCRIPT", "SHARED_FS",
    "TEMPLATE", "SlurmOptions", "add_arguments", "add_shared_arguments", "batch_problems", "bind_paths",
    "bookkeeping_command", "check", "checkpoint_world_size", "container_prefix", "default_container", "default_image",
    "default_sif", "directives", "launch", "layout_text", "main", "mount_fstype", "node_command", "option_problems",
    "options_from_args",
    "preflight", "render_script", "resume_problems", "root_cause", "shared_fs_problems", "shell_argv", "slurm_verdict",
    "srun_flags", "submit", "submit_problems", "user_batch_overrides",
]


def check(prep, args) -> list:
    """Every check before the run dir exists: errors raise together, warnings are returned for the CLI to print."""
    root = paths.root()
    return preflight(prep, args, options_from_args(args, prep.arch, root), submit=getattr(args, "submit", True),
                     root=root)


def launch(prep, args) -> int:
    """`rocmft train --runtime slurm`: check, render <run>/sbatch.sh, submit it (unless --no-submit).

    The CLI runs `check` first and prints its warnings; it runs again here (cheap) so that no caller can
    submit an unchecked job."""
    from .. import prepared

    root = paths.root()
    opts = options_from_args(args, prep.arch, root)
    want_submit = getattr(args, "submit", True)
    preflight(prep, args, opts, submit=want_submit, root=root)
    python = sys.executable if opts.container == "none" else "python"
    prep = dataclasses.replace(prep, gpus=None)  # Slurm's allocation selects the GPUs, not this shell
    plan = prepared.build_plan(prep, python=python, node_rank="$SLURM_NODEID", master_addr="$MASTER_ADDR",
                               master_port="$MASTER_PORT")
    run_dir = Path(os.path.abspath(prep.run_dir))
    script = render_script(plan, prep.recipe, prep.arch, opts, root=root, run_dir=run_dir, python=python)
    if want_submit:
        slurm_verdict(script, root)
    prepared.commit(prep, plan, runtime="slurm", image=opts.sif or opts.image, container=opts.container,
                    time_limit=opts.time)
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
    return submit(script_path, run_dir, prep.recipe.arch, root, wait=getattr(args, "wait", False),
                  verbose=getattr(args, "verbose", False))
