"""`make rm-run RUN=<name>` removes one run dir of yours, and nothing else (issue 42)."""

from __future__ import annotations

import os

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.run import remove, runs
from tests.unit.run.conftest import make_run


def refused(spec: str) -> str:
    with pytest.raises(ProblemReport) as exc:
        remove.remove(spec)
    [line] = str(exc.value).splitlines()
    return line


def test_a_run_of_yours_is_removed_by_name_and_nothing_else(runs_dir):
    gone, kept = make_run(runs_dir, "dry", state="rendered"), make_run(runs_dir, "kept")
    (gone / "output" / "big.bin").write_bytes(b"x" * 2**20)
    os.symlink(kept, gone / "output" / "a-link")  # a link inside goes as a link: what it points to stays
    assert remove.remove("dry") == f"removed {runs_dir}/dry (tiny-cpu, rendered, 1.0 MiB)"
    assert not os.path.lexists(gone) and (kept / "train.yaml").is_file()


def test_last_a_link_a_stranger_or_a_folder_outside_runs_is_refused(runs_dir, tmp_path):
    real = make_run(runs_dir, "real")
    assert refused("last").startswith("error: RUN: name the run to remove: `last` is never removed")
    os.symlink(real, runs_dir / "alias")
    assert refused("alias") == (f"error: RUN: {runs_dir}/alias is a link: not followed, not removed "
                                "(remove the link itself with rm, if it is yours)")
    outside = make_run(tmp_path / "elsewhere", "theirs")
    assert refused(str(outside)).startswith(f"error: RUN: `{outside}` is not a run in {runs_dir}/")
    assert refused("../elsewhere/theirs").startswith("error: RUN: `../elsewhere/theirs` is not a run in")
    (runs_dir / "notes").mkdir()
    assert refused("notes") == f"error: RUN: {runs_dir}/notes is not a run dir (no train.yaml or canary.json)"
    assert refused("nope").startswith("error: RUN: no run `nope` in ")
    if os.getuid() == 0:  # CI runs as root: hand the run to another user
        os.chown(real, 4242, 4242)
        assert refused("real") == f"error: RUN: {runs_dir}/real is another user's run: not removed"
    assert os.path.isdir(real) and os.path.isdir(outside)


def test_a_running_or_requeued_run_is_refused(runs_dir):
    run = make_run(runs_dir, "live")
    runs.mark(run, "running", launcher_pid=os.getpid(), host=os.uname().nodename)
    assert refused("live").startswith(f"error: RUN: {runs_dir}/live is running (launcher pid {os.getpid()})")
    runs.mark(run, "requeued", job_id="77")
    assert refused("live") == f"error: RUN: {runs_dir}/live waits for Slurm job 77 to go on (scancel 77 first)"
    assert (run / "train.yaml").is_file()
