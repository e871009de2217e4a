"""A run dir from elsewhere, and a run that loads remote code: what chat/serve/export/RESUME say and do."""

from __future__ import annotations

import os

import pytest

from rocmft.run import run_trust
from rocmft.io.problems import ProblemReport
from rocmft.serve import session
from tests.conftest import rocmft
from tests.unit.run.conftest import make_run


def test_trust_remote_code_from_a_runs_train_yaml_needs_an_opt_in(runs_dir):
    make_run(runs_dir, "remote", trust_remote_code=True)
    with pytest.raises(ProblemReport) as refused:
        session.for_run("remote", "", "local", None, env={})
    [line] = str(refused.value).splitlines()
    assert line == (f"error: {runs_dir}/remote/train.yaml: trust_remote_code: the run loads its model with "
                    "trust_remote_code: true, which runs Python code from the model's repository as you "
                    "(TRUST_REMOTE_CODE=1 to allow it for this command, if you trust that model)")
    allowed = session.for_run("remote", "", "local", None, env={"TRUST_REMOTE_CODE": "1"})
    assert allowed.target.carried["trust_remote_code"] is True
    make_run(runs_dir, "plain")
    assert session.for_run("plain", "", "local", None, env={}).messages == ()


def test_export_refuses_remote_code_without_the_opt_in(runs_dir, job_env):
    run = make_run(runs_dir, "remote", trust_remote_code=True)
    proc = rocmft("export", str(run), env={**job_env, "ROCMFT_RUNS": str(runs_dir)})
    assert proc.returncode == 2 and "TRUST_REMOTE_CODE=1" in proc.stderr
    assert not (run / "export.yaml").exists()


def test_a_run_dir_outside_the_runs_folder_or_someone_elses_gets_a_note(runs_dir, tmp_path):
    mine = make_run(runs_dir, "mine")
    assert run_trust.foreign_notes(mine, "RUN") == []
    elsewhere = make_run(tmp_path / "shared", "theirs")
    [note] = run_trust.foreign_notes(elsewhere, "RUN")
    assert note.severity == "note" and f"{elsewhere} is outside {runs_dir}/" in note.line()
    assert "loaded as you" in note.line()
    assert [m.key for m in session.for_run(str(elsewhere), "", "local", None, env={}).messages] == ["RUN"]
    if os.getuid() == 0:  # CI runs as root: hand the run to another user
        os.chown(mine, 4242, 4242)
        [note] = run_trust.foreign_notes(mine, "RESUME")
        assert "owned by" in note.line() and note.key == "RESUME"


def test_resume_from_a_run_dir_outside_the_runs_folder_gets_a_note(runs_dir, tmp_path):
    from rocmft import pipeline

    from tests.unit.run.test_checkpoints import fake_checkpoint

    elsewhere = make_run(tmp_path / "shared", "theirs")
    fake_checkpoint(elsewhere / "output" / "checkpoint-6", 6)  # complete: what RESUME= takes
    prep = pipeline.prepare("tiny-cpu", [], resume=str(elsewhere), run_name="resumed", validate=False, env={})
    assert [m.key for m in prep.messages if m.severity == "note" and "loaded as you" in m.message] == ["RESUME"]
