"""Every runtime follows the same file: where the job writes progress.jsonl is where the launcher reads it.

Docker and Slurm cannot run here, so the plan handed to them is checked as data (the worker's --run-dir, the
container's working dir and mounts, the sbatch script's `cd`); the Slurm WAIT=1 follower runs for real on
the files a job leaves in the shared run dir. CI's real dockerd and Slurm cluster run the same paths end to
end (tests/docker, tests/slurm)."""

from __future__ import annotations

import io
import os
import posixpath
import shlex
import threading
import time
from pathlib import Path

from rocmft import pipeline
from rocmft.hardware import arches
from rocmft.launch import docker as rt
from rocmft.launch import slurm
from rocmft.launch.slurm import submission
from rocmft.run import events, runs
from tests.conftest import wait_until
from tests.unit.launch.test_docker_spec import ROOT as DOCKER_ROOT
from tests.unit.launch.test_docker_spec import laptop, plan_for
from tests.unit.launch.test_slurm import args, line, prepared, render


def _run_dir_arg(argv) -> str:
    argv = list(argv)
    return argv[argv.index("--run-dir") + 1]


def _mount_holding(spec, path: str):
    found = [m for m in spec.mounts if path == m.target or path.startswith(m.target.rstrip("/") + "/")]
    return max(found, key=lambda m: len(m.target)) if found else None


def test_docker_the_job_writes_progress_where_the_launcher_follows_it_plan_as_data():
    for host_run_dir, runs_dir in ((f"{DOCKER_ROOT}/runs/x", f"{DOCKER_ROOT}/runs"), ("/scratch/runs/x", "/scratch/runs")):
        # the run path as pipeline.build_plan gives it: relative to the project root when inside it
        run_path = posixpath.relpath(host_run_dir, DOCKER_ROOT) if host_run_dir.startswith(DOCKER_ROOT) else host_run_dir
        plan = plan_for("tiny-cpu", run_path=run_path)
        spec = rt.container_spec(plan, arches.table()["cpu"], laptop(runs_dir=runs_dir), image="rocmft:cpu")
        in_container = posixpath.join(spec.working_dir, _run_dir_arg(spec.command))
        written = str(events.path(in_container))
        mount = _mount_holding(spec, written)
        assert mount is not None and not mount.read_only, (written, spec.mounts)
        # same path on both sides: what the job appends is the file run_container's Watch follows on the host
        assert mount.source == mount.target
        assert written == str(events.path(host_run_dir))


def test_slurm_the_job_writes_progress_where_wait_follows_it_plan_as_data(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = prepared("tiny-cpu", nodes=2)
    text, plan = render(prep, args(container="none"))
    root_in_script = shlex.split(line(text, "cd "))[1]
    job_run_dir = Path(root_in_script) / _run_dir_arg(plan.argv)
    followed = Path(os.path.abspath(prep.run_dir))  # what slurm.launch hands submit() and its follower
    assert events.path(job_run_dir) == events.path(followed)
    assert f"RUN_DIR={shlex.quote(str(followed))}" in text  # the job's own bookkeeping writes there too


def test_slurm_wait_follower_shows_the_events_and_the_projects_lines(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    out = io.StringIO()
    stop = threading.Event()
    follower = threading.Thread(target=submission._follow, args=(run_dir, stop, out))
    follower.start()
    time.sleep(0.3)  # the job has not started yet: no train.log, no events
    with open(run_dir / "train.log", "ab") as log:
        log.write(b"[rocmft] slurm job 42: 2 node(s) n[1-2]\n[INFO|trainer.py] >> ***** Running training *****\n")
        log.write(b"  8%|8   | 1/12 [00:00<00:00, 21.69it/s]\r{'loss': '6.671'}\n")
    for n in (1, 2):
        events.path(run_dir).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
        with open(events.path(run_dir), "a") as fh:
            fh.write(events.encode({"event": "step", "step": n, "max_steps": 12, "loss": 6.7 - n / 10}))
        wait_until(lambda n=n: f"step {n}/12" in out.getvalue(), what=f"the follower showing step {n}")
    with open(run_dir / "train.log", "ab") as log:
        log.write(b"[rocmft] done: runs/x (0:00:31)\n")
    stop.set()
    follower.join(timeout=10)
    lines = out.getvalue().splitlines()
    # Two files followed in turn: each one's lines keep their order; between them, a poll decides.
    assert sorted(lines) == sorted(["[rocmft] slurm job 42: 2 node(s) n[1-2]", "[rocmft] step 1/12  loss 6.6000",
                                    "[rocmft] step 2/12  loss 6.5000", "[rocmft] done: runs/x (0:00:31)"])
    assert lines.index("[rocmft] step 1/12  loss 6.6000") < lines.index("[rocmft] step 2/12  loss 6.5000")
    assert lines.index("[rocmft] slurm job 42: 2 node(s) n[1-2]") < lines.index("[rocmft] done: runs/x (0:00:31)")


def test_k8s_and_slurm_return_their_warnings_instead_of_printing_them(monkeypatch, tmp_path, capsys):
    from rocmft.launch import k8s

    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)
    prep = prepared("tiny-cpu", nodes=2)
    warnings = slurm.check(prep, args(submit=False))
    assert all(p.severity != "error" for p in warnings)
    assert k8s.check(prep, args(time_limit="01:00:00")) == []
    printed = capsys.readouterr()  # once: a second read would see empty buffers whatever was printed
    assert printed.out == "" and printed.err == ""
    for module in (k8s, slurm, pipeline, runs):
        source = Path(module.__file__).read_text()
        assert "cli.common" not in source and "from ..cli" not in source and "from ...cli" not in source, module
