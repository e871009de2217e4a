"""RUNTIME=slurm warns when the job's TIME is shorter than the planner's time for its training (plan.check: the
estimate the plan line of `make train` prints), before anything is submitted. The planner and the checks run for
real on a shipped recipe; Slurm itself is not needed (nothing is submitted)."""

import argparse

import pytest

from rocmft import pipeline
from rocmft.cli import train
from rocmft.launch import slurm
from rocmft.launch.slurm.checks import time_limit_problems
from rocmft.launch.slurm.options import slurm_time


def test_time_data_shorter_than_the_plan_warns_with_a_time_that_fits():
    [w] = time_limit_problems("00:30:00", (3600.0, 5400.0), "max_steps=1000 of 16 packed rows", False, 3)
    assert w.severity == "warning" and w.key == "TIME"
    assert w.message == ("TIME=00:30:00 is shorter than the planned training time (01:00:00-01:30:00 for max_steps=1000 "
                         "of 16 packed rows): Slurm stops it there; it saves and is requeued (resilience.max_requeues=3: "
                         "up to 4 attempts, each waiting in the queue again)")
    assert w.suggestion.startswith("TIME=01:30:00 or more:")
    # inside the plan's range: it may not finish; a time beyond the slow end says nothing
    [maybe] = time_limit_problems("70", (3600.0, 5400.0), "", False, 0)
    assert "may be shorter than" in maybe.message and "it is not requeued" in maybe.message
    assert time_limit_problems("1-00", (3600.0, 5400.0), "", False, 3) == []
    assert time_limit_problems("01:30:00", (3600.0, 5400.0), "", False, 3) == []
    # no throughput known (no peak for the arch): no time to compare with
    assert time_limit_problems("1", (0.0, 0.0), "", False, 3) == []
    # lengths unknown: the plan is an upper bound, and says so
    assert "at most 01:00:00" in time_limit_problems("10", (3600.0, 5400.0), "", True, 3)[0].message


def test_slurm_time_format():
    assert slurm_time(59) == "00:00:59" and slurm_time(5400) == "01:30:00"
    assert slurm_time(2 * 86400 + 3723) == "2-01:02:03"
    assert slurm.options.time_seconds(slurm_time(2 * 86400 + 3723)) == 2 * 86400 + 3723


def _args(**kw):
    base = dict(container="none", sif=None, partition=None, account=None, time_limit=None, sbatch_args="",
                container_image=None, submit=False, wait=False, gpus=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture
def planned(monkeypatch, tmp_path):
    """llama3-8b-z3 for 5,000 steps, planned as `rocmft train` plans it before any runtime's checks."""
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = pipeline.prepare("llama3-8b-z3", ["llamafactory.max_steps=5000"], validate=False, env={})
    train._check_plan(prep, force=True)
    return prep


def test_the_real_plan_of_a_shipped_recipe_against_the_default_time(planned):
    fast, slow = planned.planned_time.seconds
    assert fast > 30 * 60  # 5,000 steps of 16 packed rows of 8,192 tokens: hours, not minutes
    assert "max_steps=5000" in planned.planned_time.what  # what the plan line the user saw timed
    found = [p for p in slurm.check(planned, _args()) if p.key == "TIME" and p.severity == "warning"]
    assert len(found) == 1 and f"TIME={slurm.DEFAULT_TIME} is shorter than the planned training time" in found[0].message
    assert found[0].suggestion.startswith(f"TIME={slurm_time(-(-slow // 900) * 900)} or more")
    assert not [p for p in slurm.check(planned, _args(time_limit="2-00:00:00")) if p.severity == "warning"
                and p.key == "TIME"]


def test_no_plan_no_warning(planned):
    planned.planned_time = None  # --no-plan
    assert not [p for p in slurm.check(planned, _args()) if p.severity == "warning" and p.key == "TIME"]
