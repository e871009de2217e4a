"""What the sbatch script's bookkeeping decides after srun, as data: requeue only after a stop on Slurm's USR1
warning, at most max_requeues times, never after a real error. `scontrol` here is a stand-in that records its
arguments; the real requeue on the real cluster is tests/slurm/test_slurm_requeue.py.

`ended` runs as it runs in the job: `python -m rocmft.launch.slurm ended RUN_DIR CODE SIGNAL`, a process of its
own, with the attempt from SLURM_RESTART_COUNT and max_requeues from the run's resolved recipe. Before a
requeue it ignores SIGTERM for good (scontrol requeue signals the batch step, itself included): called in the
test process, that made every later test, and every process it started, ignore SIGTERM (issue 33)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from rocmft.launch.slurm import status as book
from rocmft.run import events, runs
from tests.unit.run.test_checkpoints import fake_checkpoint


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/bash\necho "$@" >> {tmp_path}/scontrol.calls\n'
                        'if [[ -n ${FAKE_SCONTROL_ERROR:-} ]]; then echo "$FAKE_SCONTROL_ERROR" >&2; exit 1; fi\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    run = runs.create(runs.choose("tiny-cpu", "r"))
    (run / "train.yaml").write_text("x: 1\n")
    (run / "recipe.resolved.yaml").write_text("arch: cpu\nresilience: {max_requeues: 2}\n")
    (run / "train.log").write_text("")
    runs.mark(run, "running", attempt=1, recipe="tiny-cpu", job_id="7")
    fake_checkpoint(run / "output" / "checkpoint-5", 5)
    with open(events.path(run), "a") as fh:
        fh.write(events.encode({"event": "begin", "time": 1.0, "start_step": 0, "attempt": 1}))
        fh.write(events.encode({"event": "step", "step": 5, "loss": 6.0}))
        fh.write(events.encode({"event": "stop", "step": 5, "signal": "SIGUSR1", "checkpoint": "checkpoint-5"}))
    return run


def ended(run_dir, code: int, stop: str, attempt: int = 1) -> subprocess.CompletedProcess:
    """What the sbatch script runs after srun (its max_requeues is the run's resolved recipe's: 2)."""
    env = {**os.environ, "SLURM_RESTART_COUNT": str(attempt - 1)}
    return subprocess.run([sys.executable, "-m", "rocmft.launch.slurm", "ended", str(run_dir), str(code), stop],
                          env=env, capture_output=True, text=True, timeout=120)


def calls(run_dir) -> list[str]:
    path = run_dir.parent.parent / "scontrol.calls"
    return path.read_text().splitlines() if path.is_file() else []


def test_a_stop_on_the_warning_is_requeued(run_dir):
    proc = ended(run_dir, 1, "USR1")
    assert proc.returncode == 0, proc.stderr
    assert calls(run_dir) == ["requeue 7"]
    status = runs.read_status(run_dir)
    assert status["state"] == "requeued" and status["attempts"][-1]["checkpoint"] == "checkpoint-5"
    assert "attempt 1 stopped at step 5 (checkpoint-5 saved); requeueing it (requeue 1 of at most 2)" in proc.stdout


def ended_again(run_dir, code, stop, attempt=1):
    runs.mark(run_dir, "running", attempt=attempt)
    return ended(run_dir, code, stop, attempt=attempt).returncode


def test_no_requeue_past_max_requeues_a_slurm_sigterm_or_a_real_error(run_dir):
    assert ended(run_dir, 1, "USR1", attempt=3).returncode == 75
    assert runs.read_status(run_dir)["state"] == "interrupted"
    assert "not requeued: requeued 2 times already" in runs.read_status(run_dir)["reason"]
    assert ended_again(run_dir, 137, "TERM") == 75
    assert "SIGTERM from Slurm" in runs.read_status(run_dir)["reason"]
    assert ended_again(run_dir, 1, "") == 1  # a traceback, no stop
    assert runs.read_status(run_dir)["state"] == "failed"
    (run_dir / "diverged.json").write_text(json.dumps({"cause": "loss rose", "reason": "diverged", "step": 5}))
    assert ended_again(run_dir, 3, "USR1") == 3
    assert runs.read_status(run_dir)["state"] == "diverged"
    assert calls(run_dir) == []


def test_a_refused_requeue_leaves_the_run_resumable(run_dir, monkeypatch):
    monkeypatch.setenv("FAKE_SCONTROL_ERROR", "scontrol: error: Access/permission denied")
    proc = ended(run_dir, 1, "USR1")
    assert proc.returncode == 75, proc.stderr
    status = runs.read_status(run_dir)
    assert status["state"] == "interrupted" and "Access/permission denied" in status["reason"]
    assert "continue it: make train RECIPE=tiny-cpu RESUME=r" in proc.stdout


def test_an_attempt_past_max_requeues_refuses_to_start(run_dir, capsys):
    assert book.started(run_dir, attempt=4, max_requeues=2, job={"job_id": "7"}) == 75
    status = runs.read_status(run_dir)
    assert status["state"] == "failed" and "requeued 3 times, more than resilience.max_requeues (2)" in status["reason"]
    assert book.started(run_dir, attempt=2, max_requeues=2, job={"job_id": "7"}) == 0
    assert "attempt 2 (requeue 1 of at most 2)" in capsys.readouterr().out
