"""Stops, restarts and attempts as data: the recipe's resilience block, the stop callback driven by real signals,
the events of several starts of one run, the attempts status.json keeps, and the lines that report them.

The real faults (SIGTERM, a cut checkpoint, a SIGKILLed rank, a Slurm preemption) are in tests/train,
tests/docker and tests/slurm.
"""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.launch import outcome
from rocmft.recipe import recipes
from rocmft.run import events, runs

# ---------------------------------------------------------------- the recipe

def test_resilience_defaults_and_the_demo_without_restarts():
    assert recipes.load("llama3-8b-z3").resilience == {"stop_grace_s": 300, "max_restarts": 2, "max_requeues": 3}
    assert recipes.load("tiny-cpu").resilience["max_restarts"] == 0
    assert recipes.load("tiny-cpu", ["resilience.max_restarts=1"]).resilience["max_restarts"] == 1


def test_bad_resilience_settings_are_reported_together():
    with pytest.raises(ProblemReport) as exc:
        recipes.load("tiny-cpu", ["resilience.max_restart=1", "resilience.stop_grace_s=5",
                                  "resilience.max_requeues=-1"])
    lines = str(exc.value).splitlines()
    assert any("resilience.max_restart: unknown setting (did you mean `max_restarts`" in ln for ln in lines), lines
    assert any("resilience.stop_grace_s: must be a whole number from 10 to 65535, got 5" in ln for ln in lines)
    assert any("resilience.max_requeues: must be a whole number from 0 to 1000, got -1" in ln for ln in lines)


# ---------------------------------------------------------------- the stop callback, with real signals

@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _state(step, max_steps=40):
    return SimpleNamespace(global_step=step, max_steps=max_steps, is_world_process_zero=True)


def test_a_signal_saves_the_step_it_arrived_in_then_stops(tmp_path, handlers, capsys):
    from rocmft.callbacks.stop import StopOnSignalCallback, Stopped

    cb = StopOnSignalCallback(tmp_path)
    args, control = SimpleNamespace(output_dir=str(tmp_path / "output")), SimpleNamespace(should_save=False)
    cb.on_train_begin(args, _state(0), control)
    cb.on_step_end(args, _state(1), control)
    assert control.should_save is False
    os.kill(os.getpid(), signal.SIGUSR1)  # Slurm's warning, as torchrun passes it on
    os.kill(os.getpid(), signal.SIGTERM)  # a second signal changes nothing
    cb.on_step_end(args, _state(2), control)
    assert control.should_save is True and cb.stop_at == 2
    with pytest.raises(Stopped) as exc:
        cb.on_save(args, _state(2), control)
    assert (exc.value.signame, exc.value.step, exc.value.checkpoint) == ("SIGUSR1", 2, "checkpoint-2")
    [stop] = events.read(tmp_path)
    assert stop["event"] == "stop" and stop["step"] == 2 and stop["signal"] == "SIGUSR1"
    out = capsys.readouterr().out  # the job's word, in train.log; the terminal leaves it to the launcher
    assert "[rocmft] job: SIGUSR1: finishing this optimizer step, then saving a checkpoint" in out
    assert "[rocmft] job: SIGTERM again: still stopping" in out
    assert f"[rocmft] job: stopped by SIGUSR1 at step 2/40: {tmp_path}/output/checkpoint-2 saved" in out
    from rocmft.launch import joblog

    assert out.strip() and not any(joblog.is_project_line(line) for line in out.splitlines())


def test_a_signal_on_the_last_step_lets_the_run_finish(tmp_path, handlers):
    from rocmft.callbacks.stop import StopOnSignalCallback

    cb = StopOnSignalCallback(tmp_path)
    args, control = SimpleNamespace(output_dir="out"), SimpleNamespace(should_save=False)
    cb.on_train_begin(args, _state(0), control)
    os.kill(os.getpid(), signal.SIGTERM)
    cb.on_step_end(args, _state(40), control)
    assert control.should_save is False and cb.stop_at is None
    cb.on_save(args, _state(40), control)  # the final save: no Stopped


# ---------------------------------------------------------------- events of several starts

def _step(n, loss, t, elapsed, tokens):
    return {"event": "step", "step": n, "loss": loss, "time": t, "elapsed_s": elapsed, "tokens_seen": tokens,
            "max_steps": 8}


START1 = [{"event": "begin", "time": 100.0, "start_step": 0, "attempt": 1, "restart": 0, "world_size": 1},
          _step(1, 6.7, 101, 1.0, 100), _step(2, 6.6, 102, 2.0, 200), _step(3, 6.5, 103, 3.0, 300),
          _step(4, 6.4, 104, 4.0, 400), _step(5, 6.3, 105, 5.0, 500)]  # killed after 5; checkpoint-4
START2 = [{"event": "begin", "time": 200.0, "start_step": 4, "attempt": 1, "restart": 1, "world_size": 1,
           "resumed_from": "checkpoint-4"},
          _step(5, 6.3, 201, 1.0, 500), _step(6, 6.2, 202, 2.0, 600),
          {"event": "stop", "time": 203.0, "step": 6, "signal": "SIGUSR1", "checkpoint": "checkpoint-6"}]
START3 = [{"event": "begin", "time": 400.0, "start_step": 6, "attempt": 2, "restart": 0, "world_size": 1},
          _step(7, 6.1, 401, 1.0, 700), _step(8, 6.0, 402, 2.0, 800),
          {"event": "end", "time": 403.0, "step": 8, "max_steps": 8, "elapsed_s": 3.0}]


def test_later_starts_replace_the_steps_an_earlier_one_logged_after_its_checkpoint():
    evs = START1 + START2 + START3
    assert [e["step"] for e in events.steps(evs)] == list(range(1, 9))
    assert [e["time"] for e in events.steps(evs)][4] == 201  # step 5 as trained again
    parts = events.segments(evs)
    assert [len(p["steps"]) for p in parts] == [5, 2, 2] and parts[1]["stop"]["checkpoint"] == "checkpoint-6"
    t = events.totals(evs)
    assert t.last_step == 8 and t.first_loss == (1, 6.7) and t.last_loss == (8, 6.0)
    assert t.train_s == pytest.approx(5.0 + 3.0 + 3.0)  # each start's own time; the gaps left out
    # tokens over seconds within each start: (500-100)/(5-1) + ... = (400 + 100 + 100) / (4 + 1 + 1)
    assert t.tokens_per_s_per_gpu == pytest.approx(600 / 6)


# ---------------------------------------------------------------- attempts in status.json

@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    run = runs.create(runs.choose("tiny", "r"))
    (run / "train.yaml").write_text("x: 1\n")
    return run


def _append(run, evs):
    with open(events.path(run), "a") as fh:
        fh.write("".join(events.encode(e) for e in evs))


def test_each_attempt_is_kept_with_what_its_events_say(run_dir):
    runs.mark(run_dir, "running", attempt=1, job_id="7", nodelist="n[1-2]", host="n1")
    _append(run_dir, START1 + START2)
    runs.mark(run_dir, "requeued", exit_code=1, reason="SIGUSR1 from Slurm")
    runs.mark(run_dir, "running", attempt=2, job_id="7", nodelist="n[1-2]")
    status = runs.read_status(run_dir)
    assert "ended" not in status and "reason" not in status and "exit_code" not in status  # the last attempt's
    _append(run_dir, START3)
    status = runs.mark(run_dir, "succeeded", exit_code=0)
    one, two = status["attempts"]
    assert one == {"attempt": 1, "started": one["started"], "job_id": "7", "nodelist": "n[1-2]", "host": "n1",
                   "ended": one["ended"], "how": "requeued: SIGUSR1 from Slurm", "exit_code": 1, "start_step": 0,
                   "step": 6, "restarts": 1, "stopped_by": "SIGUSR1", "checkpoint": "checkpoint-6"}
    assert two["start_step"] == 6 and two["step"] == 8 and two["restarts"] == 0 and two["how"] == "succeeded"
    lines = outcome.attempt_lines(run_dir, status)
    assert lines[0].startswith("[rocmft] attempts   2 (1: requeued: SIGUSR1 from Slurm at step 6, 1 restart(s); "
                               "2: succeeded at step 8)")
    assert lines[1] == ("[rocmft] restarts   2 start(s) after the first; 1 step(s) trained again "
                        "(done after the checkpoint each resumed from)")


def test_an_attempt_killed_without_a_record_is_closed_by_the_next(run_dir):
    runs.mark(run_dir, "running", attempt=1)
    _append(run_dir, START1)
    status = runs.mark(run_dir, "running", attempt=2)
    first = status["attempts"][0]
    assert first["how"] == "ended without a record (killed, or requeued by Slurm)" and first["step"] == 5


def test_make_runs_notes_attempts_restarts_and_the_saved_checkpoint(run_dir, capsys):
    from rocmft.cli import runs as cli_runs

    runs.mark(run_dir, "running", attempt=1, recipe="tiny", job_id="7")
    _append(run_dir, START1 + START2)
    runs.mark(run_dir, "requeued", exit_code=1, reason="SIGUSR1 from Slurm")
    assert cli_runs.run(SimpleNamespace(last=0)) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[3] == "requeued"  # after RUN, RECIPE, STAGE
    assert row.endswith("slurm job 7 waits for its next attempt; 1 restart; saved checkpoint-6"), row


def test_a_stopped_run_says_what_it_saved_and_how_to_go_on(run_dir):
    from tests.unit.run.test_checkpoints import fake_checkpoint

    runs.mark(run_dir, "running", recipe="tiny")
    _append(run_dir, START1 + START2)
    fake_checkpoint(run_dir / "output" / "checkpoint-6", 6)
    status = runs.mark(run_dir, "interrupted", exit_code=130, signal="SIGINT")
    assert outcome.stopped_lines(run_dir, status) == [
        f"[rocmft] interrupted by SIGINT at step 6: {run_dir}/output/checkpoint-6 saved",
        "[rocmft] continue it: make train RECIPE=tiny RESUME=r"]
    json.dumps(status)  # what status.json holds stays plain JSON


def test_the_line_to_go_on_is_the_whole_command(run_dir):
    """The recipe by its path when it is not in recipes/, and the launch options that are no recipe key (a recipe
    key, SET= included, comes with RESUME= itself), quoted for the shell."""
    status = runs.mark(run_dir, "interrupted", recipe="mine", recipe_file="../elsewhere/my recipes/mine.yaml",
                       options={"RUNTIME": "docker", "GPUS": "2,3", "IMAGE_REF": "rocmft:dev", "FORCE": "1"})
    assert outcome.train_command(run_dir, status, resume=True) == (
        "make train 'RECIPE=../elsewhere/my recipes/mine.yaml' RESUME=r RUNTIME=docker GPUS=2,3 IMAGE_REF=rocmft:dev "
        "FORCE=1")
    status = runs.mark(run_dir, "interrupted", recipe="tiny-cpu", recipe_file="recipes/tiny-cpu.yaml",
                       options={"RUNTIME": "local", "$(rm -rf x)": "1", "GPUS": ["not", "text"]})
    assert outcome.train_command(run_dir, status, resume=False) == "make train RECIPE=tiny-cpu RUNTIME=local"


def test_a_run_that_trained_no_step_never_shows_as_succeeded(run_dir, capsys):
    """A resume at or past max_steps that got by (an epochs-based run): the Trainer ends well having trained nothing."""
    from rocmft.cli import runs as cli_runs

    (run_dir / "train.yaml").write_text("stage: sft\n")
    runs.mark(run_dir, "running", recipe="tiny")
    _append(run_dir, [{"event": "begin", "start_step": 1297, "max_steps": 12, "attempt": 1},
                      {"event": "end", "step": 1297, "max_steps": 12}])
    assert outcome.finish(run_dir, 0, "cpu") == outcome.EXIT_NOTHING_TRAINED
    status = runs.read_status(run_dir)
    assert status["state"] == "failed" and status["reason"] == "trained no step (began at step 1297, max_steps 12)"
    assert f"[rocmft] FAILED: trained no step (began at step 1297, max_steps 12): {run_dir}" in capsys.readouterr().out
    assert cli_runs.run(SimpleNamespace(last=0, state=None)) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[3] == "FAILED" and row.endswith("trained no step (began at step 1297, max_steps 12)"), row


def test_a_multi_process_cpu_resume_loads_its_optimizer_state():
    """transformers asks for map_location=`cpu:0` on a multi-process CPU run (its args.device); torch knew only `cpu`."""
    import io

    import torch

    from rocmft import worker

    saved = io.BytesIO()
    torch.save({"exp_avg": torch.ones(3)}, saved)
    worker._load_cpu_indexed_storage()
    saved.seek(0)
    assert torch.load(saved, map_location=torch.device("cpu", 0), weights_only=True)["exp_avg"].tolist() == [1.0] * 3
