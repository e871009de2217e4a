"""Inside the job: what the sbatch script runs to record in <run>/status.json that the run started, and
how it ended (the node whose failure explains the job's exit code), as a local run would."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ... import recipes, runs

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
    from ..outcome import finish

    log = run_dir / "train.log"
    cause, lines = root_cause(log.read_text(errors="replace") if log.is_file() else "", code)
    for line in lines:
        print(f"[rocmft] {line}", flush=True)
    return finish(run_dir, cause, arch_name)


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
