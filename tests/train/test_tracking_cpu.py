"""Experiment tracking that works (issue 46), for real (`pytest -m train`): one short tiny-cpu training with
`report_to: [tensorboard, wandb, mlflow]`, no W&B key and no MLflow server exported, writes TensorBoard event files,
an offline W&B run and an MLflow file store, all in its run dir (the events read back by TensorBoard itself); the missing
key is one warning; `make runs` says where each went."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_env

pytestmark = pytest.mark.train

STEPS = 3


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    env = make_env(tmp_path_factory.mktemp("tracking"))
    for name in ("WANDB_API_KEY", "WANDB_MODE", "MLFLOW_TRACKING_URI", "WANDB_DIR"):
        env.pop(name, None)
    proc = subprocess.run(["make", "-s", "train", "RECIPE=tiny-cpu", "RUNTIME=local", "RUN_NAME=tracked",
                           f"SET=report_to=[tensorboard,wandb,mlflow] max_steps={STEPS}"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return Path(env["ROCMFT_RUNS"]) / "tracked", env, proc.stdout


def test_tensorboard_events_hold_the_training_loss(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, _, _ = trained
    events = sorted((run / "output" / "tensorboard").glob("events.out.tfevents.*"))
    assert events
    losses = []
    for path in events:
        acc = EventAccumulator(str(path))
        acc.Reload()
        if "train/loss" in acc.Tags()["scalars"]:
            losses += [e.step for e in acc.Scalars("train/loss")]
    assert losses == list(range(1, STEPS + 1))


def test_wandb_ran_offline_into_the_run_dir(trained):
    run, _, output = trained
    [offline] = (run / "output" / "wandb").glob("offline-run-*")
    [log] = offline.glob("run-*.wandb")  # the run's records, what `wandb sync` uploads
    assert log.stat().st_size > 0
    [warning] = [ln for ln in output.splitlines() if ln.startswith("warning:") and "WANDB_API_KEY" in ln]
    assert f"W&B runs offline (WANDB_MODE=offline) into {run}/output/wandb" in warning


def test_mlflow_wrote_a_file_store_in_the_run_dir(trained):
    run, _, _ = trained
    [loss] = (run / "output" / "mlruns").glob("*/*/metrics/loss")  # <experiment>/<run id>/metrics/loss
    steps = [int(line.split()[2]) for line in loss.read_text().splitlines()]  # `<time> <value> <step>` per log
    assert steps == list(range(1, STEPS + 1))


def test_make_runs_shows_where_each_tracker_went(trained):
    run, env, _ = trained
    proc = subprocess.run(["make", "-s", "runs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    [row] = [ln for ln in proc.stdout.splitlines() if ln.startswith("tracked ")]
    assert (f"tracking: tensorboard {run}/output/tensorboard, wandb offline {run}/output/wandb, "
            f"mlflow {run}/output/mlruns") in row, row
