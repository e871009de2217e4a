"""Preemption and requeue on the real 2-node Slurm cluster (scripts/ci/slurm-up.sh): one run, three attempts,
one run dir, every step once.

1. Attempt 1 gets USR1 on the batch script, exactly what `--signal=B:USR1@<grace>` sends before the time limit
   (and at preemption where PreemptParameters=send_user_signal): `scancel --signal=USR1 --batch`, so the test
   does not wait a minute for Slurm's coarse time-limit timer. The ranks on both nodes finish their step,
   save checkpoint-<k>, the script requeues the job itself: nothing after the checkpoint is lost.
2. Attempt 2 resumes from checkpoint-<k> and is preempted the hard way: `scontrol requeue` (SIGTERM to every
   process of the job, then SIGKILL; Slurm requeues it itself). Nothing is saved by the stop: the steps after
   the newest periodic checkpoint are trained again.
3. Attempt 3 resumes from that periodic checkpoint and finishes.

Slurm holds a requeued job for its credential lifetime (AuthInfo=cred_expire, 120 s by default) before it may
run again; the test releases it at once (`scontrol update ... StartTime=now`), which only skips that wait.

A job that fails with a Python error is not requeued: tests/slurm/test_slurm_train.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, offline_env
from tests.slurm.test_slurm_train import cluster  # noqa: F401 - the fixture: both nodes idle, or fail

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sinfo") is None,
                       reason="Slurm is not installed (no sinfo): start the local cluster with scripts/ci/slurm-up.sh (root)"),
]
STEPS, SAVE = 30, 4


def _events(run: Path) -> list[dict]:
    from rocmft.run import events

    return events.read(run)


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _until(what: str, check, proc: subprocess.Popen, timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the launcher ended while waiting for {what}: {proc.communicate()[0][-4000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _step_in_attempt(run: Path, attempt: int, at_least: int):
    """The newest step logged by `attempt` once it is >= at_least."""
    steps, current = [], None
    for e in _events(run):
        if e["event"] == "begin":
            current = e.get("attempt")
        elif e["event"] == "step" and current == attempt:
            steps.append(e["step"])
    return steps[-1] if steps and steps[-1] >= at_least else None


def _release_when_pending(job: str, proc: subprocess.Popen) -> float:
    """Wait for the requeued job to pend, then lift Slurm's requeue hold. Returns when it was released."""
    def pending():
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        return out == "PENDING"
    _until(f"job {job} to pend again", pending, proc, timeout=120)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, capture_output=True)
    return time.time()


def test_a_preempted_job_is_requeued_and_finishes_every_step_in_the_same_run_dir(cluster, tmp_path, tiny_model):  # noqa: F811
    from rocmft.run import checkpoints, events

    run = tmp_path / "runs" / "slurm-requeue"
    proc = subprocess.Popen([sys.executable, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "slurm",
                             "--nodes", "2", "--container", "none", "--wait", "--time", "00:15:00", "--no-plan",
                             "--run-name", run.name, f"max_steps={STEPS}", f"save_steps={SAVE}"],
                            cwd=ROOT, env=offline_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    try:
        # attempt 1: the time-limit warning after step 5
        _until("step 5 of attempt 1", lambda: _step_in_attempt(run, 1, 5), proc)
        job = _status(run)["job_id"]
        warned = time.time()
        subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
        _until("the requeue of attempt 1", lambda: _status(run).get("state") == "requeued", proc)
        stop1 = next(e for e in _events(run) if e["event"] == "stop")
        released1 = _release_when_pending(job, proc)
        # attempt 2: past the next periodic checkpoint, then preempted by `scontrol requeue`
        target = (stop1["step"] // SAVE + 1) * SAVE + 1
        _until(f"step {target} of attempt 2", lambda: _step_in_attempt(run, 2, target), proc)
        reached2 = _step_in_attempt(run, 2, target)
        preempted = time.time()
        subprocess.run(["scontrol", "requeue", job], check=True)
        released2 = _release_when_pending(job, proc)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", _status(run).get("job_id", "0")], check=False)
    assert proc.returncode == 0, out[-6000:]

    found = _events(run)
    parts = events.segments(found)
    assert [p["begin"]["attempt"] for p in parts] == [1, 2, 3]
    one, two, three = parts
    k = stop1["step"]
    # 1: stopped by the warning at step k on both nodes, checkpoint-k saved, requeued by the script
    assert stop1["signal"] == "SIGUSR1" and stop1["checkpoint"] == f"checkpoint-{k}"
    assert [e["step"] for e in one["steps"]] == list(range(1, k + 1)) and k >= 5
    # 2: resumed from exactly that checkpoint (no step lost), killed without a save after step reached2 or so
    assert two["begin"]["start_step"] == k and two["begin"]["resumed_from"] == f"checkpoint-{k}"
    assert two["steps"][0]["step"] == k + 1 and two["end"] is None
    last2 = two["steps"][-1]["step"]
    assert last2 >= reached2
    # 3: from the newest checkpoint attempt 2 completed (a periodic one: srun kills its tasks on Slurm's SIGTERM,
    # so a save on that signal would be luck), to the end
    p = three["begin"]["start_step"]
    assert p % SAVE == 0 or (two["stop"] and two["stop"]["step"] == p)
    assert k < p <= last2 and three["begin"]["resumed_from"] == f"checkpoint-{p}"
    assert [e["step"] for e in three["steps"]] == list(range(p + 1, STEPS + 1))
    lost = last2 - p  # trained again: what attempt 2 did after its last checkpoint
    assert lost < SAVE + 2
    # every step once; the optimizer steps actually taken; the loss goes on where it was
    assert [e["step"] for e in events.steps(found)] == list(range(1, STEPS + 1))
    assert sum(len(x["steps"]) for x in parts) == k + (last2 - k) + (STEPS - p)
    redo = {e["step"]: e["loss"] for e in two["steps"]}
    if p + 1 in redo:  # attempt 2 trained past its checkpoint: the same step from the same weights, the same loss
        assert three["steps"][0]["loss"] == pytest.approx(redo[p + 1], rel=1e-4)
    else:  # the ranks caught Slurm's SIGTERM and saved the step they were in before srun's kill reached them
        assert two["stop"]["step"] == p == last2
    # the next step keeps what attempt 1 learnt: its loss holds most of the fall from step 1 (a restart from the
    # base weights would start near step 1's loss again; one step's loss moves by ~0.2 with the batch)
    first, last = one["steps"][0]["loss"], one["steps"][-1]["loss"]
    assert two["steps"][0]["loss"] < first - (first - last) / 2, (first, last, two["steps"][0]["loss"])
    assert json.loads((run / "output" / "trainer_state.json").read_text())["global_step"] == STEPS
    assert (run / "output" / "adapter_model.safetensors").is_file()
    assert checkpoints.problem(run / "output" / f"checkpoint-{STEPS}") is None

    status = _status(run)
    assert status["state"] == "succeeded" and status["exit_code"] == 0 and status["job_id"] == job
    assert [a["attempt"] for a in status["attempts"]] == [1, 2, 3]
    a1, a2, a3 = status["attempts"]
    assert a1["how"].startswith("requeued: SIGUSR1 from Slurm") and a1["checkpoint"] == f"checkpoint-{k}"
    assert a1["step"] == k and a2["start_step"] == k and a3["start_step"] == p and a3["how"] == "succeeded"
    assert a2["how"].startswith(("interrupted: SIGTERM from Slurm", "ended without a record"))
    assert all(a["nodelist"] == "n[1-2]" for a in status["attempts"])
    log = (run / "train.log").read_text(errors="replace")
    assert log.count(f"[rocmft] slurm job {job}:") == 3  # one log, appended by every attempt
    assert "[rocmft] slurm sent SIGUSR1" in log and f"attempt 1 stopped at step {k} (checkpoint-{k} saved)" in log
    assert out.count("[rocmft] done:") == 1 and "[rocmft] attempts   3" in out  # one summary, at the end
    print(f"attempt 2 stop: {two['stop']}")
    print(f"USR1 -> checkpoint-{k} saved {stop1['time'] - warned:.1f} s after the warning; attempt 2 trained again "
          f"{two['steps'][0]['time'] - released1:.1f} s after its release; scontrol requeue at step {last2}: "
          f"{lost} step(s) trained again, attempt 3 trained {three['steps'][0]['time'] - released2:.1f} s after its "
          f"release ({released2 - preempted:.1f} s requeue)")
