"""Resume is lossless (issue 42), for real on CPU through make, as a user types it (`pytest -m train`).

A run trained with SET= (its own dataset, step count and save interval) is stopped with a terminal's Ctrl-C:
SIGINT to make's whole process group. The launcher names that one signal (never the SIGTERM it passes on to
the job), and the line it prints to go on is run as printed: the resumed run trains the same data for the same
steps, from the checkpoint the stop saved. (A checkpoint past max_steps, refused before a run dir, and each
difference from the run said: tests/unit/run/test_resume.py, on a run dir as this one leaves it.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, make_env, wait_until

pytestmark = pytest.mark.train
ASKED = {"dataset": "demo_sharegpt", "max_steps": 40, "save_steps": 4}  # none of them tiny-cpu's own values
SET = " ".join(f"{k}={v}" for k, v in ASKED.items())


def _steps(run: Path) -> list[int]:
    from rocmft.run import events

    return [e["step"] for e in events.steps(events.read(run))]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, tiny_model):
    """(env, the run, what make printed) for a run stopped by Ctrl-C once it logged step 5."""
    from tests import processes

    env = make_env(tmp_path_factory.mktemp("resume"))
    run = Path(env["ROCMFT_RUNS"]) / "asked"
    mark = processes.Mark(processes.TEST_VAR)
    out_file = run.parent.parent / "interrupted.out"
    with open(out_file, "w") as out:  # a session of its own: the group a terminal's Ctrl-C reaches
        make = subprocess.Popen(["make", "-s", "train", "RECIPE=tiny-cpu", "RUN_NAME=asked", f"SET={SET}"], cwd=ROOT,
                                env=mark.env(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: make.poll() is None and any(s >= 5 for s in _steps(run)), timeout=600,
                       what="step 5 of the run")
            os.killpg(make.pid, signal.SIGINT)
            make.wait(timeout=300)
        finally:
            mark.stop()
    return env, run, out_file.read_text()


def test_ctrl_c_names_the_one_signal_it_sent_and_prints_the_whole_command(interrupted):
    _, run, out = interrupted
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "interrupted" and status["signal"] == "SIGINT", out[-3000:]
    assert "SIGINT" in out and "SIGTERM" not in out, out[-3000:]  # the job got the launcher's SIGTERM: not said
    assert re.findall(r"^\[rocmft\] continue it: (.*)$", out, re.MULTILINE) == ["make train RECIPE=tiny-cpu RESUME=asked"]


def test_the_printed_line_trains_the_same_data_and_steps_from_the_saved_checkpoint(interrupted):
    env, run, out = interrupted
    [line] = re.findall(r"^\[rocmft\] continue it: (.*)$", out, re.MULTILINE)
    saved = json.loads((run / "status.json").read_text())["attempts"][-1]["checkpoint"]
    proc = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    [resumed] = [Path(p) for p in re.findall(r"^\[rocmft\] run dir: (.*)$", proc.stdout, re.MULTILINE)]
    args = yaml.safe_load((resumed / "train.yaml").read_text())
    assert {k: args[k] for k in ASKED} == ASKED  # what the interrupted run was asked, not the recipe file's
    assert args["resume_from_checkpoint"].endswith(f"{run.name}/output/{saved}")
    step = int(saved.split("-")[1])
    assert _steps(resumed) == list(range(step + 1, ASKED["max_steps"] + 1))
    assert json.loads((resumed / "status.json").read_text())["state"] == "succeeded"
    assert 'llamafactory.dataset="demo_sharegpt" (recipe file: "demo_alpaca,demo_messages")' in proc.stdout

