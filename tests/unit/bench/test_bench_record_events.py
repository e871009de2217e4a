"""A bench row is read from the run's files: the progress events decide whether it ran the steps it was asked."""

import pytest

from rocmft import bench
from rocmft.io.problems import ProblemReport
from rocmft.run import events, runs


def _bench_run(tmp_path, evs, steps=4):
    run = tmp_path / "run"
    run.mkdir()
    bench.write_record(run, recipe_name="tiny-cpu", recipe_path="recipes/tiny-cpu.yaml", steps=steps, stored_overrides=[])
    if evs is not None:
        events.path(run).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
        events.path(run).write_text("".join(events.encode(e) for e in evs))
    return run


def _steps(n, total=4):
    return [{"event": "step", "step": s, "max_steps": total, "loss": 5.0} for s in range(1, n + 1)]


def test_a_complete_run_is_recorded(tmp_path):
    run = _bench_run(tmp_path, [{"event": "begin"}, *_steps(4), {"event": "end", "step": 4, "max_steps": 4}])
    assert bench.read_record(run)["steps"] == 4


def test_a_run_without_events_here_is_left_to_its_metrics(tmp_path):
    assert bench.read_record(_bench_run(tmp_path, None))["recipe"] == "tiny-cpu"


@pytest.mark.parametrize("evs, said", [
    ([{"event": "begin"}, *_steps(2)], "end at step 2 of 4, and training has not ended"),
    ([{"event": "begin"}, *_steps(3), {"event": "end", "step": 3, "max_steps": 4}], "end at step 3 of 4"),
])
def test_a_run_short_of_its_steps_gives_no_row(tmp_path, evs, said):
    run = _bench_run(tmp_path, evs)
    with pytest.raises(ProblemReport) as err:
        bench.read_record(run)
    assert said in str(err.value) and "did not complete" in str(err.value)
    assert runs.read_status(run) == {}  # nothing written
