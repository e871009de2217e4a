"""`last` means the last training: the newest run `make train` trained, yours, said before a command acts; a
canary's, a bench's, a render's or a dry run's dir is never it (issue 42)."""

from __future__ import annotations

import json
import os
import time

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.run import pick, runs
from tests.unit.run.conftest import make_run


def stamp(run, started: float, **status) -> None:
    data = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**data, "started": started, **status}))


def test_last_is_the_newest_training_and_says_which_it_is(runs_dir):
    old, new = make_run(runs_dir, "a"), make_run(runs_dir, "b")
    stamp(old, 5.0, made_by="train")
    stamp(new, 1.0, made_by="train")
    assert pick.find("last") == old
    stamp(new, time.time(), made_by="train")
    found, [note] = pick.pick("last", key="FROM")
    assert found == new and note.severity == "note"
    assert note.line().startswith(f"note: FROM: last = {new} (tiny-cpu sft, succeeded, started ")
    assert pick.pick("b") == (new, []) and pick.find(str(old)) == old  # named: no note


@pytest.mark.parametrize("made_by", ["canary", "bench", "render", "dry-run"])
def test_a_newer_canary_bench_render_or_dry_run_is_never_last(runs_dir, made_by):
    trained = make_run(runs_dir, "trained")
    stamp(trained, 1.0, made_by="train")
    other = make_run(runs_dir, "other")
    stamp(other, time.time(), made_by=made_by)
    assert pick.find("last", key="RESUME") == trained
    assert pick.find("other") == other  # named, it is still found


def test_a_training_that_never_launched_is_not_last(runs_dir):
    launched = make_run(runs_dir, "launched")
    stamp(launched, 1.0, made_by="train")
    stuck = make_run(runs_dir, "submit-0", state="rendered")  # SUBMIT=0: the sbatch script only
    stamp(stuck, time.time(), made_by="train")
    assert pick.find("last") == launched


def test_run_dirs_from_before_made_by_are_judged_by_what_they_hold(runs_dir):
    trained = make_run(runs_dir, "old-training")  # no made_by: launched, so a training
    canary = make_run(runs_dir, "tiny-cpu-canary-20261202-101500-reference")
    dry = make_run(runs_dir, "old-dry-run", state="rendered")
    (dry / "versions.json").write_text(json.dumps({"dry_run": True}))
    bench = make_run(runs_dir, "old-bench")
    (bench / "bench.json").write_text("{}")
    for i, run in enumerate((trained, canary, dry, bench)):
        stamp(run, 1.0 + i)
    assert [runs.made_by(r, runs.read_status(r)) for r in (trained, canary, dry, bench)] == \
        ["train", "canary", "dry-run", "bench"]
    assert pick.find("last") == trained


def test_last_of_a_recipe_and_no_training_at_all(runs_dir):
    run = make_run(runs_dir, "a")
    stamp(run, 1.0, made_by="train", recipe="tiny-cpu")
    assert pick.find("last", recipe="tiny-cpu") == run
    with pytest.raises(ProblemReport) as exc:
        pick.find("last", key="RESUME", recipe="tiny-cpu-dpo")
    [line] = str(exc.value).splitlines()
    assert line.startswith("error: RESUME: no training of tiny-cpu-dpo of yours in ")
    with pytest.raises(ProblemReport) as exc:
        pick.find("nope")
    assert str(exc.value).startswith("error: RUN: unknown run `nope`: not a run directory")


def test_last_is_never_a_run_planted_with_a_start_in_the_future(runs_dir):
    """A job's container could write its run's status.json: a `started` years ahead must not make it `last`
    (RESUME=last unpickles its checkpoint) over a run that really began later."""
    planted = make_run(runs_dir, "planted")
    stamp(planted, 4e9, made_by="train")
    real = make_run(runs_dir, "real")
    stamp(real, time.time(), made_by="train", state="running")
    assert pick.find("last") == real and pick.find("last", recipe="tiny-cpu") == real
    if os.getuid() == 0:  # CI runs as root: hand a run to another user; it is never `last`, however new
        os.chown(real, 4242, 4242)
        assert pick.find("last") == planted
        os.chown(planted, 4242, 4242)
        with pytest.raises(ProblemReport):
            pick.find("last")
