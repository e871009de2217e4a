"""Faults injected into real CPU trainings of the tiny model (`pytest -m train`): the run survives each one.

- SIGTERM to `rocmft train`: the job finishes its optimizer step, saves checkpoint-<that step>, the run is
  marked interrupted with it (exit 143).
- RESUME= from that run with its newest checkpoint cut short: the checkpoint is skipped with a warning naming
  it, the one before is used, and the loss of the first step after it is the one the stopped run logged for
  that step (same weights, same data, restored RNG).
- 2 processes, rank 1 killed with SIGKILL, `resilience.max_restarts=1`: torchrun restarts both ranks, they
  resume from the newest complete checkpoint in the same run dir, and the run finishes every step.

Each test asserts the global step, the optimizer steps actually taken and the loss continuity. The 2-process
Ctrl-C save (every rank agreeing on the step) is in test_train_cpu.py; across two Slurm nodes, tests/slurm.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, offline_env, rocmft

pytestmark = pytest.mark.train
STEPS = 40  # ~0.1 s each here: long enough to stop mid-run, short enough to finish fast
SAVE = 4


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("faults"))


def _events(run: Path) -> list[dict]:
    from rocmft.run import events

    return events.read(run)


def _logged(run: Path) -> list[dict]:
    return [e for e in _events(run) if e["event"] == "step"]  # as logged, every start's steps


def _start(env, name, *overrides) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "local",
                             "--run-name", name, "--no-plan", f"max_steps={STEPS}", f"save_steps={SAVE}", *overrides],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_step(run: Path, step: int, proc: subprocess.Popen, timeout=900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e["step"] >= step for e in _logged(run)):
            return
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    raise AssertionError(f"step {step} not reached")


def _kill_tree(proc: subprocess.Popen) -> None:
    """A test that failed half way leaves no training behind (ranks run in sessions of their own)."""
    from rocmft.launch.local import _descendants

    if proc.poll() is None:
        for pid in [proc.pid, *_descendants(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _state(checkpoint: Path) -> dict:
    return json.loads((checkpoint / "trainer_state.json").read_text())


@pytest.fixture(scope="module")
def stopped(env):
    """A 1-process run stopped by SIGTERM after step 9: (run dir, the launcher's output, its exit code)."""
    run = Path(env["ROCMFT_RUNS"]) / "sigterm"
    launcher = _start(env, run.name)
    try:
        _wait_for_step(run, 9, launcher)
        sent, sent_at = time.monotonic(), time.time()
        launcher.send_signal(signal.SIGTERM)
        out, _ = launcher.communicate(timeout=300)
    finally:
        _kill_tree(launcher)
    stop = next((e for e in _events(run) if e["event"] == "stop"), {})
    print(f"SIGTERM after step {max(e['step'] for e in _logged(run))}: checkpoint-{stop.get('step')} saved "
          f"{stop.get('time', sent_at) - sent_at:.1f} s later, launcher exit {time.monotonic() - sent:.1f} s later")
    return run, out, launcher.returncode


def test_sigterm_saves_a_checkpoint_at_the_step_it_stopped(stopped):
    from rocmft.run import checkpoints

    run, out, code = stopped
    assert code == 143, out[-3000:]
    [stop] = [e for e in _events(run) if e["event"] == "stop"]
    step = stop["step"]
    logged = [e["step"] for e in _logged(run)]
    assert 9 <= step < STEPS and stop["signal"] == "SIGTERM" and stop["checkpoint"] == f"checkpoint-{step}"
    assert logged == list(range(1, step + 1))  # every optimizer step taken was logged, and none after the stop
    checkpoint = run / "output" / f"checkpoint-{step}"
    assert checkpoints.problem(checkpoint) is None and _state(checkpoint)["global_step"] == step
    assert not (run / "output" / "adapter_model.safetensors").exists()  # no half-trained "final" adapter
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "interrupted" and status["signal"] == "SIGTERM" and status["exit_code"] == 143
    [attempt] = status["attempts"]
    assert attempt["checkpoint"] == f"checkpoint-{step}" and attempt["step"] == step and attempt["start_step"] == 0
    assert f"interrupted by SIGTERM at step {step}: {run}/output/checkpoint-{step} saved" in out
    assert f"RESUME={run.name}" in out


def test_a_cut_newest_checkpoint_is_skipped_and_the_one_before_resumed(env, stopped):
    from rocmft.run import checkpoints

    original_run, _, _ = stopped
    # cut in a copy: the stopped run is the module's, and test_sigterm_saves_... checks its checkpoint whole
    run = Path(shutil.copytree(original_run, original_run.with_name("sigterm-cut"), symlinks=True))
    step = max(s for s, _ in checkpoints.listed(run / "output"))
    newest = run / "output" / f"checkpoint-{step}"
    adapter = newest / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:1000])  # a node died while writing it
    before = max(s for s, _ in checkpoints.listed(run / "output") if s < step)
    launched = time.time()
    proc = rocmft("train", "tiny-cpu", "--runtime", "local", "--run-name", "resumed", "--no-plan", "--resume", run.name,
                  f"max_steps={STEPS}", f"save_steps={SAVE}", env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"warning: RESUME: {newest} is incomplete (adapter_model.safetensors is cut off" in proc.stderr
    resumed = Path(env["ROCMFT_RUNS"]) / "resumed"
    status = json.loads((resumed / "status.json").read_text())
    assert status["resumed_from"].endswith(f"{run.name}/output/checkpoint-{before}")
    logged = _logged(resumed)
    assert [e["step"] for e in logged] == list(range(before + 1, STEPS + 1))  # STEPS - before optimizer steps
    assert _state(resumed / "output" / f"checkpoint-{STEPS}")["global_step"] == STEPS
    original = {e["step"]: e["loss"] for e in _logged(original_run)}
    assert logged[0]["loss"] == pytest.approx(original[before + 1], rel=1e-5)  # the same step, the same loss
    print(f"checkpoint-{step} cut: resumed from checkpoint-{before} ({step - before} step(s) trained again), "
          f"first step {logged[0]['time'] - launched:.1f} s after RESUME was launched")


def test_a_killed_rank_is_restarted_and_the_run_finishes_every_step(env):
    from rocmft.run import events

    run = Path(env["ROCMFT_RUNS"]) / "restarted"
    launcher = _start(env, run.name, "gpus_per_node=2", "resilience.max_restarts=1")
    try:
        _wait_for_step(run, 6, launcher)
        os.kill(_find_rank(run, "1"), signal.SIGKILL)
        killed_at = time.time()
        reached = max(e["step"] for e in _logged(run))
        out, _ = launcher.communicate(timeout=900)
    finally:
        _kill_tree(launcher)
    assert launcher.returncode == 0, out[-3000:]
    found = _events(run)
    first, second = events.segments(found)
    resumed_from = second["begin"]["start_step"]
    assert second["begin"]["restart"] == 1 and second["begin"]["resumed_from"] == f"checkpoint-{resumed_from}"
    assert resumed_from % SAVE == 0 and 0 < resumed_from <= reached  # the newest checkpoint before the kill
    print(f"rank 1 SIGKILLed after step {reached}: resumed from step {resumed_from}, its first step logged "
          f"{second['steps'][0]['time'] - killed_at:.1f} s after the kill")
    # every step once after deduplication; the optimizer steps taken: the first start's and the second's
    assert [e["step"] for e in events.steps(found)] == list(range(1, STEPS + 1))
    taken = len(first["steps"]) + len(second["steps"])
    last_first = first["steps"][-1]["step"]
    assert taken == last_first + (STEPS - resumed_from)
    assert [e["step"] for e in second["steps"]] == list(range(resumed_from + 1, STEPS + 1))
    before = {e["step"]: e["loss"] for e in first["steps"]}
    if resumed_from + 1 in before:  # the first start logged that step before the kill: the same loss again
        assert second["steps"][0]["loss"] == pytest.approx(before[resumed_from + 1], rel=1e-4)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "succeeded" and status["attempts"][0]["restarts"] == 1
    assert json.loads((run / "output" / "trainer_state.json").read_text())["global_step"] == STEPS
    assert (run / "output" / "adapter_model.safetensors").is_file()
    assert f"resuming this run from its checkpoint-{resumed_from}" in (run / "train.log").read_text()
    assert "[rocmft] restarts   1 start(s) after the first" in out


def _find_rank(run: Path, local_rank: str, timeout=60) -> int:
    """The pid of the training process with this LOCAL_RANK that belongs to `run` (its environment says)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"LOCAL_RANK={local_rank}".encode() in environ and f"ROCMFT_RUN_DIR={run}".encode() in environ \
                    and b"rocmft.worker" in (proc / "cmdline").read_bytes():
                return int(proc.name)
        time.sleep(0.2)
    raise AssertionError(f"rank {local_rank} of {run} not found")
