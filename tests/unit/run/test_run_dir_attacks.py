"""Issue 32, item 2: a job must not get the host to write a file of yours through its run dir.

Each test plays the job: it plants what code inside a container (same uid, the run dir's paths) could leave
at a name the host writes next, a symlink to a file standing for ~/.bashrc, then runs the real host code
that writes there and checks the target is untouched. The same for what the host reads back: a FIFO, a
symlink to a private file, a huge file, JSON of the wrong shape. The container-side half, planted from
inside a real container on the real daemon, is tests/docker/test_container_security.py.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
from pathlib import Path

import pytest

from rocmft.io import hostio
from rocmft.launch import outcome
from rocmft.launch.plan import LaunchPlan
from rocmft.run import events, runs

BASHRC = "# ~/.bashrc of the victim\nalias ll='ls -l'\n"


@pytest.fixture
def victim(tmp_path):
    """A file that stands for ~/.bashrc: what a planted link points the host's write at."""
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text(BASHRC)
    return path


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    d = runs.create(tmp_path / "runs" / "tiny-cpu-1")
    (d / "train.yaml").write_text("stage: sft\n")
    return d


def plant(run_dir: Path, names, target: Path) -> None:
    for name in names:
        (run_dir / name).symlink_to(target)


def untouched(victim: Path) -> bool:
    return victim.read_text() == BASHRC and not victim.is_symlink()


def test_the_job_folder_is_output_and_the_run_dir_above_it_holds_the_host_files(run_dir):
    assert runs.job_dir(run_dir) == run_dir / "output" and (run_dir / "output").is_dir()
    assert events.path(run_dir) == run_dir / "output" / "progress.jsonl"
    # a run dir from before the split keeps being read where its job wrote
    old = run_dir.parent / "old"
    old.mkdir()
    (old / "progress.jsonl").write_text(events.encode({"event": "step", "step": 3, "loss": 1.0}))
    assert events.path(old) == old / "progress.jsonl" and events.read(old)[0]["step"] == 3


@pytest.mark.parametrize("names", [("status.json.tmp",), ("status.json",), ("status.json.tmp", "status.json")])
def test_status_is_never_written_through_a_planted_link(run_dir, victim, names):
    plant(run_dir, names, victim)
    runs.mark(run_dir, "running", runtime="docker", launcher_pid=os.getpid())
    runs.mark(run_dir, "failed", exit_code=1)
    assert untouched(victim)
    status = run_dir / "status.json"
    assert not status.is_symlink() and json.loads(status.read_text())["state"] == "failed"


def test_outcome_finish_ignores_a_status_link_and_a_hostile_diverged_report(run_dir, victim, tmp_path, capsys):
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    plant(run_dir, ("status.json", "status.json.tmp"), victim)
    # the job's report, every field of the wrong type
    (runs.job_dir(run_dir) / "diverged.json").write_text(json.dumps(
        {"reason": ["x"], "cause": {"a": 1}, "loss_tail": [["a", None], 5, {"x": 1}], "thresholds": "inf",
         "learning_rate": "0.1", "step": "9"}))
    assert outcome.finish(run_dir, 0, "cpu") == outcome.EXIT_DIVERGED
    assert untouched(victim)
    status = runs.read_status(run_dir)
    assert status["state"] == "diverged" and isinstance(status["cause"], str)
    # a diverged.json that is a link to a private file is not read through
    os.unlink(run_dir / "status.json")
    (runs.job_dir(run_dir) / "diverged.json").unlink()
    (runs.job_dir(run_dir) / "diverged.json").symlink_to(secret)
    outcome.finish(run_dir, 0, "cpu")
    assert "PRIVATE KEY" not in capsys.readouterr().out + (run_dir / "status.json").read_text()


def test_local_runtime_refuses_to_append_train_log_through_a_link(run_dir, victim):
    from rocmft.launch import local

    plant(run_dir, ("train.log",), victim)
    plan = LaunchPlan(argv=(sys.executable, "-c", "print('owned')"), env={}, unset_env=(), secret_env=(),
                      run_path=str(run_dir), nproc_per_node=1, nnodes=1, visible_devices=None, arch="cpu",
                      distributed=False)
    with pytest.raises(hostio.UnsafeFile, match="symbolic link"):
        local.run(plan, run_dir, quiet=True)
    assert untouched(victim)


def test_append_refuses_a_hard_link_and_a_fifo(tmp_path, victim):
    os.link(victim, tmp_path / "train.log")
    with pytest.raises(hostio.UnsafeFile):
        hostio.open_append(tmp_path / "train.log")
    os.mkfifo(tmp_path / "export.log")
    with pytest.raises(hostio.UnsafeFile):
        hostio.open_append(tmp_path / "export.log")
    assert untouched(victim)


def test_append_refuses_a_file_of_another_user(tmp_path, monkeypatch):
    """A job running as another uid (a shared cluster account, a container's user) may leave a log at a name the
    host appends to: the host never writes into a file it does not own. As root (CI) the file really belongs to
    nobody (65534); otherwise this process is seen as another uid than the file's."""
    log = tmp_path / "train.log"
    log.write_text("the other user's\n")
    if os.geteuid() == 0:
        os.chown(log, 65534, 65534)
    else:
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    with pytest.raises(hostio.UnsafeFile, match="not a regular file of this user"):
        hostio.open_append(log)
    assert log.read_text() == "the other user's\n"


def test_eval_report_is_never_written_through_a_planted_link(run_dir, victim):
    from rocmft.evaluate import report

    plant(run_dir, (".eval.json.tmp", "eval.json", ".eval.md.tmp", "eval.md"), victim)
    built = {"run": "runs/tiny-cpu-1", "data": "held-out", "rows": 1, "base_model": "m", "tuned_model": "m+lora",
             "template": "llama3", "base": {"eval_loss": 2.0}, "tuned": {"eval_loss": 1.5}, "examples": []}
    report.write(run_dir, built)
    assert untouched(victim)
    assert report.tuned_loss(run_dir) == 1.5 and not (run_dir / "eval.json").is_symlink()


def test_bench_record_is_never_written_through_a_planted_link(run_dir, victim):
    from rocmft.bench import record

    plant(run_dir, ("bench.json.tmp", "bench.json"), victim)
    record.write_record(run_dir, recipe_name="tiny-cpu", recipe_path="recipes/tiny-cpu.yaml", steps=0,
                        stored_overrides=[])
    assert untouched(victim) and record.read_record(run_dir)["recipe"] == "tiny-cpu"
    (run_dir / "bench.json").write_text(json.dumps({"steps": 1, "overrides": "not a list"}))
    with pytest.raises(runs.ProblemReport):
        record.read_record(run_dir)


def test_export_never_writes_its_config_or_log_through_a_planted_link(run_dir, victim, tmp_path, monkeypatch):
    from rocmft.cli import export, main

    monkeypatch.setenv("TRUST_REMOTE_CODE", "1")
    (run_dir / "train.yaml").write_text("stage: sft\nmodel_name_or_path: models/none\nfinetuning_type: lora\n")
    (runs.job_dir(run_dir) / "adapter_model.safetensors").write_bytes(b"")
    other = tmp_path / "profile"
    other.write_text(BASHRC)
    plant(run_dir, ("export.yaml",), victim)
    plant(run_dir, ("export.log",), other)
    # the config is written beside the link and renamed over it; the log refuses to follow its link, so the
    # export never starts (one line, exit 1)
    assert main.main(["export", str(run_dir)]) == 1
    assert untouched(victim) and untouched(other)
    assert not (run_dir / "export.yaml").is_symlink() and "adapter_name_or_path" in (run_dir / "export.yaml").read_text()
    assert export  # the command under test


def test_reads_of_job_files_never_block_follow_links_or_load_huge_files(run_dir, tmp_path):
    job = runs.job_dir(run_dir)
    os.mkfifo(job / "progress.jsonl")  # a FIFO: an open() for reading would wait for a writer forever
    done = threading.Event()

    def read():
        events.read(run_dir)
        runs.log_entries(run_dir)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "reading the job's progress.jsonl blocked on a FIFO"
    (job / "progress.jsonl").unlink()
    secret = tmp_path / "secret.jsonl"
    secret.write_text(events.encode({"event": "step", "step": 1, "loss": 1.0}))
    (job / "progress.jsonl").symlink_to(secret)
    assert events.read(run_dir) == []
    (job / "progress.jsonl").unlink()
    with open(job / "progress.jsonl", "wb") as fh:  # sparse: no disk used
        fh.truncate(hostio.LOG_LIMIT + 1)
    assert events.read(run_dir) == []
    (job / "trainer_log.jsonl").write_text('[1,2]\n"x"\n{"current_steps": "a", "loss": []}\n'
                                           '{"current_steps": 2, "loss": 0.5}\n')
    assert runs.losses(run_dir) == [(2, 0.5)]
    # event fields of the wrong type read as missing, never as a crash later
    assert events.decode('{"event": "step", "step": "7", "loss": [1], "max_steps": true}') == {
        "event": "step", "step": None, "loss": None, "max_steps": None}


def test_make_runs_survives_a_status_of_the_wrong_shape(run_dir):
    (run_dir / "status.json").write_text(json.dumps({"state": "succeeded", "started": "x", "ended": [],
                                                     "exit_code": "0", "attempts": "no"}))
    [info] = runs.all_runs()
    assert info.duration_s is None and info.exit_code is None and runs.read_status(run_dir)["attempts"] == []
    (run_dir / "status.json").write_text("[1, 2]")
    assert runs.read_status(run_dir) == {}


# N12 (issue 43): the host read a job's checkpoint files (RESUME=, the interrupted run's "continue it" line, a
# diverged run's last good checkpoint) with plain open(): a FIFO hung the launcher, an 8 GiB sparse safetensors
# whose header claims 8 GiB was read into memory (MemoryError), a link was followed. Each is planted in the newest
# checkpoint beside a complete older one; the host's RESUME= runs in a process of its own with 1 GiB of address
# space and a deadline, so that neither a hang nor an 8 GiB read can take the test machine with it.
RESUME = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from pathlib import Path
from rocmft.run import resume
found, skipped = resume.checkpoint(Path(sys.argv[1]))
print(found.name)
for problem in skipped:
    print(problem.message)
"""


def _complete_checkpoint(folder: Path, step: int) -> None:
    from tests.unit.run.test_checkpoints import fake_checkpoint, safetensors, torch_file

    fake_checkpoint(folder, step)
    safetensors(folder / "adapter_model.safetensors")
    torch_file(folder / "optimizer.pt")
    torch_file(folder / "scheduler.pt")


def _huge_safetensors(path: Path) -> None:
    size = 8 << 30
    with open(path, "wb") as fh:  # sparse: no disk used
        fh.write(struct.pack("<Q", size - 8))
        fh.truncate(size)


@pytest.mark.parametrize("attack", ["fifo state", "linked state", "huge safetensors", "fifo latest",
                                    "linked checkpoint"])
def test_checkpoint_files_are_read_like_every_job_file(attack, run_dir, tmp_path):
    import subprocess

    job = runs.job_dir(run_dir)
    _complete_checkpoint(job / "checkpoint-1", 1)
    newest = job / "checkpoint-2"
    if attack == "linked checkpoint":  # the folder itself a link to a complete checkpoint elsewhere
        _complete_checkpoint(tmp_path / "elsewhere" / "checkpoint-2", 2)
        newest.symlink_to(tmp_path / "elsewhere" / "checkpoint-2")
    else:
        _complete_checkpoint(newest, 2)
    if attack == "fifo state":
        (newest / "trainer_state.json").unlink()
        os.mkfifo(newest / "trainer_state.json")
    elif attack == "linked state":
        secret = tmp_path / "secret.json"
        secret.write_text(json.dumps({"global_step": 2}))
        (newest / "trainer_state.json").unlink()
        (newest / "trainer_state.json").symlink_to(secret)
    elif attack == "huge safetensors":
        _huge_safetensors(newest / "adapter_model.safetensors")
    elif attack == "fifo latest":
        (newest / "global_step2").mkdir()
        os.mkfifo(newest / "latest")
    try:
        proc = subprocess.run([sys.executable, "-c", RESUME, str(run_dir)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "ROCMFT_RUNS": str(run_dir.parent)})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{attack}: the host's RESUME= hung on the planted file")
    assert proc.returncode == 0, f"{attack}: {proc.stderr.strip().splitlines()[-1:]}"
    found, *skipped = proc.stdout.strip().splitlines()
    assert found == "checkpoint-1", (attack, proc.stdout)
    if attack != "linked checkpoint":  # a linked folder is not a checkpoint of this run at all
        assert len(skipped) == 1 and "checkpoint-2 is incomplete (" in skipped[0], (attack, skipped)
