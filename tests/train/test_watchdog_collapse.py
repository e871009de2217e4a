"""The watchdog on a real CPU run: a collapsed network is a failed run (exit 3, diverged.json with reason
`collapsed`). That a healthy run trains the same with the watchdog on as off is
tests/train/test_train_cpu.py::test_rendered_yaml_runs_with_plain_llamafactory_cli_and_our_callbacks_change_no_loss
(the run without rocmft's callbacks trains the session run's losses)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import rocmft

pytestmark = pytest.mark.train


def test_learning_rate_1000_collapses_and_exits_3(tiny_model, job_env, tmp_path):
    proc = rocmft("train", "tiny-cpu", "learning_rate=1000", "--run-name", "collapsed", env=job_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    report = json.loads((tmp_path / "runs" / "collapsed" / "output" / "diverged.json").read_text())
    vocab = json.loads((tiny_model / "config.json").read_text())["vocab_size"]
    assert report["reason"] == "collapsed" and report["vocab_size"] == vocab
    assert "COLLAPSED" in out and "lower the learning rate tenfold" in out
    status = json.loads((tmp_path / "runs" / "collapsed" / "status.json").read_text())
    assert status["state"] == "diverged" and status["reason"] == "collapsed" and status["exit_code"] == 3
