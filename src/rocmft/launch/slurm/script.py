"""The sbatch script: the launch plan rendered for Slurm (pure: same inputs, same bytes).

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

Preemption and time limits: `--requeue` (the job may run again, same id, same run dir), `--signal=B:USR1@<grace>`
(the script's warning before the time limit, passed on to the ranks, which save), `--open-mode=append` (every
attempt's output in one train.log); the template explains the rest.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Iterable, Mapping

from ... import __version__
from ...hardware.arches import Arch
from ...io.problems import raise_if_errors
from ...recipe.recipes import Recipe
from .. import mountable, names
from ..outcome import EXIT_STOPPED
from ...run.jobfiles import JOB_DIR
from ..docker.spec import CACHE_ENV
from ..plan import DEVICE_VARS, LaunchPlan
from .options import SlurmOptions, warning_seconds

SCRIPT = "sbatch.sh"
TEMPLATE = "sbatch.sh.j2"
# Plan placeholders -> what each node's shell expands (quoted: a value is one argument whatever it holds).
PLACEHOLDERS = {
    "$SLURM_NODEID": '"${SLURM_NODEID}"',
    "$MASTER_ADDR": '"${MASTER_ADDR}"',
    "$MASTER_PORT": '"${MASTER_PORT}"',
}


def shell_argv(argv: Iterable[str]) -> str:
    """The plan's argv as one shell line: every word quoted, the rendezvous placeholders left to the node."""
    return " ".join(PLACEHOLDERS.get(a) or shlex.quote(a) for a in argv)


class NodeExpands(str):
    """A word the node's shell expands (`$(id -u)`, `${SLURM_JOB_ID}`): written in double quotes. Every other
    word is quoted whole, so a `$(` in a path or an image name stays text."""


def _quote(word: str) -> str:
    return f'"{word}"' if isinstance(word, NodeExpands) else shlex.quote(word)


def bind_paths(root: Path, run_dir: Path, env: Mapping[str, str], *, job: bool = False) -> list[tuple[str, bool]]:
    """(path, writable) a container must see at the same path: the project read-only, and what is written:
    for the bookkeeping (rocmft's own code: status.json of this and a requeued attempt) the runs dir; for the
    job only its run dir's job folder (output/, runs.JOB_DIR), the run dir above it read-only, as in
    RUNTIME=docker (docker/spec.py); then the HF cache and the plan's caches, which may lie inside the
    project. Code run inside cannot rewrite the checkout (.git/config, .venv/bin, the Makefile) that the user
    runs next, nor plant a link where the host writes."""
    binds = [(str(root), False)]
    if job:
        run_dir = Path(os.path.abspath(run_dir))
        if not run_dir.is_relative_to(root):
            binds.append((str(run_dir), False))
        writes = [run_dir / JOB_DIR]
    else:
        writes = [run_dir.parent]
    keys = ("HF_HOME", *CACHE_ENV)
    for path in writes + [Path(env[k]) for k in keys if os.path.isabs(env.get(k) or "")]:
        path = Path(os.path.abspath(path))
        if not any(rw and (path == Path(b) or Path(b) in path.parents) for b, rw in binds):
            binds.append((str(path), True))
    return binds


def container_prefix(opts: SlurmOptions, arch: Arch, binds: list[tuple[str, bool]], root: Path,
                     env_names: Iterable[str], *, job: bool) -> list[str]:
    """The words before the plan's argv. `job`: the training task (GPUs, network) vs. a bookkeeping call."""
    if opts.container == "apptainer":
        # Contained as RUNTIME=docker is: by default Apptainer binds $HOME, /tmp, /var/tmp and the working
        # directory read-write. --contain gives empty /tmp and /var/tmp and a scratch HOME, --no-home keeps
        # the real one out, --no-mount cwd the project, which is then bound read-only like every path
        # below with its own mode. Not --containall: its --cleanenv would drop the plan's environment and
        # the secrets sbatch --export=ALL hands the job. What remains: docs/security.md.
        words = ["apptainer", "exec", "--contain", "--no-home", "--no-mount", "cwd"]
        if arch.is_gpu and job:
            words.append("--rocm")  # binds the host's /dev/kfd, /dev/dri and ROCm user-space libraries
        for path, rw in binds:
            words += ["--bind", f"{path}:{path}" + ("" if rw else ":ro")]
        return words + ["--pwd", str(root), str(opts.sif)]
    if opts.container == "docker":
        # As the submitting user: files in the run dir stay theirs, and NFS with root_squash stays writable.
        words = ["docker", "run", "--rm", "--init", "--user", NodeExpands("$(id -u):$(id -g)")]
        if job:
            words += ["--network=host", "--ipc=host"]
            if arch.is_gpu:
                # Docker's seccomp profile stays on; CAP_SYS_NICE lets ROCr bind buffers to NUMA nodes (docker/spec.py)
                words += ["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video", "--cap-add=SYS_NICE"]
            for name in env_names:
                words += ["-e", name]  # the value comes from the task's environment, never from this file
        else:
            # bookkeeping needs no GPU (skip the image's device check) but the job's id and nodes
            words += ["-e", "ROCMFT_SKIP_GPU_CHECK=1", "-e", "SLURM_JOB_ID", "-e", "SLURM_JOB_NODELIST",
                      "-e", "SLURM_RESTART_COUNT"]
        for path, rw in binds:
            words += ["-v", f"{path}:{path}" + ("" if rw else ":ro")]
        return words + ["-w", str(root), str(opts.image)]
    return []


def node_command(plan: LaunchPlan, opts: SlurmOptions, arch: Arch, job_binds: list[tuple[str, bool]], root: Path) -> str:
    """What one node's task runs (in `bash -c`): the plan's argv, wrapped for the container mode."""
    env_names = sorted({*plan.env, *plan.secret_env, "ROCMFT_ATTEMPT"})
    parts = [f'echo "[rocmft] node ${{SLURM_NODEID}} (${{SLURMD_NODENAME}}): {plan.nproc_per_node} '
             f'process{"es" if plan.nproc_per_node != 1 else ""}"']
    if arch.is_gpu:
        # Slurm's GPU plugin may set several selection variables; ROCm applies them one after the other.
        # Keep the one ROCr reads and drop the others (see plan.DEVICE_VARS).
        others = " ".join(v for v in (*DEVICE_VARS, "GPU_DEVICE_ORDINAL") if v != "ROCR_VISIBLE_DEVICES")
        parts.append(f'if [[ -n "${{ROCR_VISIBLE_DEVICES:-}}" ]]; then unset {others}; fi')
    prefix = container_prefix(opts, arch, job_binds, root, env_names, job=True)
    if opts.container == "docker":
        # The container gets the task's name so a cancelled job's container can be found (docker ps).
        prefix = prefix[:4] + ["--name", NodeExpands("rocmft-${SLURM_JOB_ID}-${SLURM_NODEID}")] + prefix[4:]
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
    # Requeueable, and warned before the time limit (Slurm may send it up to 60 s earlier than asked).
    lines += ["--requeue", f"--signal=B:USR1@{warning_seconds(recipe.resilience['stop_grace_s'], opts.time)}"]
    if opts.partition:
        lines.append(f"--partition={opts.partition}")
    if opts.account:
        lines.append(f"--account={opts.account}")
    lines += [f"--chdir={root}", f"--output={run_dir}/train.log", "--open-mode=append", "--export=ALL"]
    lines += list(opts.sbatch_args)
    # each is one `#SBATCH` line: a newline in a recipe's file name or the project's path would start another
    raise_if_errors([p for line in lines for p in names.check("#SBATCH", line)])
    return lines


def srun_flags() -> list[str]:
    # One task per node holding every CPU the job got there: Slurm 22.05 stopped passing sbatch's
    # --cpus-per-task on to srun, and a 1-CPU task would pin all of torchrun's ranks to one core.
    return ["--kill-on-bad-exit=1", '--nodes="${SLURM_JOB_NUM_NODES}"', '--ntasks="${SLURM_JOB_NUM_NODES}"',
            "--ntasks-per-node=1", '--cpus-per-task="${SLURM_CPUS_ON_NODE}"']


def bookkeeping_command(opts: SlurmOptions, arch: Arch, binds: list[tuple[str, bool]], root: Path, python: str) -> str:
    prefix = container_prefix(opts, arch, binds, root, (), job=False)
    py = python if opts.container == "none" else "python"
    return " ".join(_quote(w) for w in [*prefix, py, "-m", "rocmft.launch.slurm"])


def render_script(plan: LaunchPlan, recipe: Recipe, arch: Arch, opts: SlurmOptions, *, root: Path, run_dir: Path,
                  python: str) -> str:
    """The sbatch script: pure (same inputs, same bytes), so tests pin it."""
    from ...recipe.render import environment

    binds = bind_paths(root, run_dir, plan.env)
    job_binds = bind_paths(root, run_dir, plan.env, job=True)
    if opts.container != "none":  # `.../x,/home` would be a second --bind of /home (issue 43, N7)
        raise_if_errors([p for path, _ in dict.fromkeys(binds + job_binds) if (p := mountable.syntax_problem("bind", path))])
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
        node_cmd_q=shlex.quote(node_command(plan, opts, arch, job_binds, root)),
        srun_flags=srun_flags(), grace=warning_seconds(recipe.resilience["stop_grace_s"], opts.time),
        max_requeues=recipe.resilience["max_requeues"], exit_stopped=EXIT_STOPPED,
    )
