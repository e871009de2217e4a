"""Bad input to `make eval` through the real CLI and make: one line per problem, exit 2, nothing started
(no model loaded, no container, no eval.json written)."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT, offline_env, rocmft
from tests.unit.run.conftest import make_run


@pytest.fixture
def env(tmp_path):
    return offline_env(tmp_path, DOCKER_HOST="unix:///nonexistent/docker.sock")


def errors(proc) -> list[str]:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert all(line.startswith(("error: ", "note: ", "warning: ")) for line in lines), lines
    assert "[rocmft] eval" not in proc.stdout + proc.stderr  # it never started
    return [line for line in lines if line.startswith("error: ")]


@pytest.mark.parametrize("tasks", [[], ["--tasks", "rocmft_demo"]], ids=["held-out", "harness"])
def test_a_run_with_nothing_saved(env, tmp_path, tasks):
    make_run(tmp_path / "runs", "broken", state="failed", adapter=False, val_size=0.1)
    assert errors(rocmft("eval", "broken", *tasks, env=env)) == [
        (f"error: RUN: {tmp_path}/runs/broken has no adapter to load: the run ended failed before its first save "
         "(it saves every 6 steps) (pick a run that saved one: `make runs`)")]
    assert not (tmp_path / "runs" / "broken" / "eval.json").exists()


def test_an_unregistered_dataset_and_a_bad_row_count_are_both_reported(env, tmp_path):
    make_run(tmp_path / "runs", "ok", val_size=0.1)
    found = errors(rocmft("eval", "ok", "--data=no_such_set", "--rows=0", env=env))
    assert len(found) == 2
    assert found[0].startswith("error: N: `0` is not a positive whole number of rows")
    assert found[1].startswith("error: DATA: `no_such_set` is not a registered dataset in data/dataset_info.json")


@pytest.mark.parametrize("var", ["N=-1", "N=lots", "DATA=nope", "RUN=nope"])
def test_make_eval_refuses_in_one_line(env, tmp_path, var):
    make_run(tmp_path / "runs", "ok", val_size=0.1)
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    args = ["make", "-s", "eval", *([] if var.startswith("RUN=") else ["RUN=ok"]), var]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not (tmp_path / "runs" / "ok" / "eval.json").exists()
