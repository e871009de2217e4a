from datetime import datetime

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.run import runs
from tests.unit.run.test_checkpoints import fake_checkpoint


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_auto_names_never_collide():
    now = datetime(2026, 12, 2, 10, 0, 0)
    a = runs.create(runs.choose("tiny", now=now))
    b = runs.create(runs.choose("tiny", now=now))
    assert a != b and a.name == "tiny-20261202-100000" and b.name == "tiny-20261202-100000-2"


def test_an_existing_named_run_is_refused(runs_dir):
    runs.create(runs.choose("tiny", "mine"))
    with pytest.raises(ProblemReport) as exc:
        runs.choose("tiny", "mine")
    assert "never reused or overwritten" in str(exc.value)
    with pytest.raises(ProblemReport):
        runs.choose("tiny", "../escape")


def test_resume_needs_a_checkpoint(runs_dir):
    from rocmft.run import pick, resume

    run = runs.create(runs.choose("tiny", "r1"))
    (run / "train.yaml").write_text("x: 1\n")
    with pytest.raises(ProblemReport) as exc:
        resume.checkpoint(pick.find("r1"))
    assert "has no complete checkpoint" in str(exc.value)
    for n in (6, 12):
        fake_checkpoint(run / "output" / f"checkpoint-{n}", n)
    found, skipped = resume.checkpoint(pick.find("r1"))
    assert found.name == "checkpoint-12" and skipped == []
    with pytest.raises(ProblemReport):
        pick.find("no-such-run")


def test_status_and_listing(runs_dir):
    run = runs.create(runs.choose("tiny", "r2"))
    (run / "train.yaml").write_text("x: 1\n")
    assert (run / "output").is_dir()  # the job folder, made with the run dir
    (run / "output" / "trainer_log.jsonl").write_text('{"current_steps": 1, "loss": 3.0}\n{"current_steps": 2, "loss": 2.5}\n')
    runs.mark(run, "running", recipe="tiny", launcher_pid=999999, host=__import__("os").uname().nodename)
    info = runs.all_runs()[0]
    assert info.state == "interrupted"  # its launcher is gone
    runs.mark(run, "succeeded", exit_code=0)
    info = runs.all_runs()[0]
    assert info.state == "succeeded" and info.final_loss == 2.5 and info.duration_s is not None


def test_listing_reads_the_progress_events(runs_dir, capsys):
    from rocmft.cli import runs as cli_runs
    from rocmft.run import events

    run = runs.create(runs.choose("tiny", "r3"))
    (run / "train.yaml").write_text("x: 1\n")
    evs = [{"event": "begin", "world_size": 2, "max_steps": 20},
           {"event": "step", "step": 1, "max_steps": 20, "loss": 4.0, "tokens_seen": 1000, "elapsed_s": 1.0},
           {"event": "step", "step": 2, "max_steps": 20, "loss": 3.5, "tokens_seen": 9000, "elapsed_s": 3.0}]
    events.path(run).write_text("".join(events.encode(e) for e in evs))
    runs.mark(run, "running", recipe="tiny")  # no launcher pid: a runtime that reports itself
    info = runs.all_runs()[0]
    assert info.final_loss == 3.5 and info.last_step == 2 and info.max_steps == 20
    assert info.tokens_per_s_per_gpu == 2000.0  # 8000 tokens in 2 s over 2 GPUs
    assert cli_runs.run(type("A", (), {"last": 0})()) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:8] == ["RUN", "RECIPE", "STAGE", "STATUS", "STEPS", "LOSS", "EVAL", "TOK/S/GPU"]
    assert row.split()[:8] == ["r3", "tiny", "sft", "running", "2/20", "3.5000", "-", "2,000"]  # no `make eval` yet


def test_listing_names_each_run_s_stage_and_a_dpo_run_s_reward_accuracy(runs_dir, capsys):
    from rocmft.cli import runs as cli_runs

    old = runs.create(runs.choose("tiny-cpu-dpo", "before"))  # from before status.json kept the stage
    (old / "train.yaml").write_text("stage: dpo\n")
    runs.mark(old, "succeeded", recipe="tiny-cpu-dpo", exit_code=0, started=1.0)
    new = runs.create(runs.choose("tiny-cpu-pt", "after"))
    (new / "train.yaml").write_text("stage: sft\n")  # status.json wins: it is what the run was committed with
    runs.mark(new, "succeeded", recipe="tiny-cpu-pt", stage="pt", exit_code=0, started=2.0)
    dpo = runs.create(runs.choose("tiny-cpu-dpo", "dpo"))
    (dpo / "train.yaml").write_text("stage: dpo\n")
    runs.mark(dpo, "succeeded", recipe="tiny-cpu-dpo", stage="dpo", exit_code=0, reward_accuracy=0.8333, started=3.0)
    assert [i.stage for i in runs.all_runs()] == ["dpo", "pt", "dpo"]
    assert cli_runs.run(type("A", (), {"last": 0})()) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[:4] == ["before", "tiny-cpu-dpo", "dpo", "succeeded"]
    assert rows[2].split()[2] == "pt"
    assert rows[3].endswith("reward accuracy 0.83 (last logged steps)")


# ---------------------------------------------------------------- issue 32: run dirs are private, `last` is yours

def test_a_run_dir_is_private_to_its_user():
    import stat

    run = runs.create(runs.choose("tiny", "private"))
    assert stat.S_IMODE(run.stat().st_mode) == 0o700


# ---------------------------------------------------------------- issue 42: dry runs apart, canaries marked, STATE=

def _made(name: str, made_by: str, state: str, started: float):
    run = runs.create(runs.choose("tiny", name))
    (run / "train.yaml").write_text("stage: sft\n")
    runs.mark(run, state, recipe="tiny", made_by=made_by, started=started)
    return run


def test_dry_runs_are_counted_apart_canaries_marked_and_state_filters(runs_dir, capsys):
    from types import SimpleNamespace

    from rocmft.cli import runs as cli_runs

    _made("trained", "train", "succeeded", 1.0)
    _made("canary-reference", "canary", "succeeded", 2.0)
    _made("dry", "dry-run", "rendered", 3.0)
    _made("broken", "train", "failed", 4.0)
    assert cli_runs.run(SimpleNamespace(last=0, state=None)) == 0
    out = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in out[1:4]] == ["trained", "canary-reference", "broken"]
    assert out[2].endswith("canary run") and out[4].startswith("(1 dry run(s) and render(s) not listed")
    assert cli_runs.run(SimpleNamespace(last=0, state="rendered")) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].split()[0] == "dry" and out[1].endswith("dry run: nothing ran")
    assert cli_runs.run(SimpleNamespace(last=0, state="failed,succeeded")) == 0
    assert [r.split()[0] for r in capsys.readouterr().out.splitlines()[1:]] == ["trained", "canary-reference", "broken"]
    with pytest.raises(ProblemReport) as exc:
        cli_runs.run(SimpleNamespace(last=0, state="done"))
    assert str(exc.value) == ("error: STATE: unknown state done (one or more of: rendered,running,requeued,succeeded,"
                              "failed,interrupted,diverged)")
