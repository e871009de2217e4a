"""The watchdog on real CPU runs: a collapsed network is a failed run (exit 3, diverged.json with reason
`collapsed`), and a healthy run trains the same with the watchdog on as off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import rocmft

pytestmark = pytest.mark.train


def losses(run_dir):
    rows = [json.loads(line) for line in (run_dir / "output" / "trainer_log.jsonl").read_text().splitlines()]
    return [(r["current_steps"], r["loss"]) for r in rows if "loss" in r]


def test_learning_rate_1000_collapses_and_exits_3(tiny_model, job_env, tmp_path):
    proc = rocmft("train", "tiny-cpu", "learning_rate=1000", "--run-name", "collapsed", env=job_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    report = json.loads((tmp_path / "runs" / "collapsed" / "diverged.json").read_text())
    assert report["reason"] == "collapsed" and report["vocab_size"] == 817
    assert "COLLAPSED" in out and "lower the learning rate tenfold" in out
    status = json.loads((tmp_path / "runs" / "collapsed" / "status.json").read_text())
    assert status["state"] == "diverged" and status["reason"] == "collapsed" and status["exit_code"] == 3


def test_watchdog_on_and_off_give_identical_losses(tiny_model, job_env):
    on = rocmft("train", "tiny-cpu", "--run-name", "on", env=job_env)
    off = rocmft("train", "tiny-cpu", "watchdog=false", "--run-name", "off", env=job_env)
    assert on.returncode == 0 and off.returncode == 0, (on.stdout + off.stdout)[-3000:]
    runs = Path(job_env["ROCMFT_RUNS"])
    assert losses(runs / "on") == losses(runs / "off")
    assert len(losses(runs / "on")) == 12
