"""What a person sees from a real CPU run (`pytest -m train`): `make demo` under a real pseudo-terminal (the
live line redrawn in place, then the summary), a tiny-cpu `make train` piped (the session's `trained_run`: a
plain line per step, no carriage-return bars, a short output), and a run whose dataset has a bad row (the
cause in the last lines, the log's path)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TrainedRun, make_env, rocmft

pytestmark = pytest.mark.train
MAX_PIPED_LINES = 40  # for tiny-cpu's run (12 steps, read from it): what is not a step line stays within 40 - 12


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return make_env(tmp_path_factory.mktemp("progress"))


def logged_steps(run: Path) -> list[int]:
    lines = (run / "output" / "trainer_log.jsonl").read_text().splitlines()
    return [json.loads(line)["current_steps"] for line in lines if '"loss"' in line]


def run_in_pty(argv: list[str], env: dict[str, str], timeout: float = 600) -> tuple[int, bytes]:
    """The command with a pseudo-terminal as its stdin/stdout/stderr, as a person's shell runs it."""
    parent, child = pty.openpty()
    proc = subprocess.Popen(argv, cwd=ROOT, env={**env, "TERM": "xterm-256color", "COLUMNS": "120"},
                            stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([parent], [], [], 0.5)
        if ready:
            try:
                data = os.read(parent, 65536)
            except OSError:  # EIO: the last holder of the terminal closed it
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    os.close(parent)
    return proc.wait(timeout=60), out


def test_make_demo_on_a_terminal_redraws_one_live_line_and_ends_with_the_summary(env):
    # 6 of the demo's 60 steps: the terminal's behaviour is the claim here; what the demo teaches in 60 steps is
    # test_demo_cpu.py's (the session's piped `demo_run`), so CI trains the full demo once
    code, raw = run_in_pty(["make", "-s", "demo", "RUN_NAME=tty", "SET=max_steps=6"], env)
    text = raw.decode("utf-8", "replace")
    assert code == 0, text[-3000:]
    run = Path(env["ROCMFT_RUNS"]) / "tty"
    total = TrainedRun(run, text).max_steps
    assert total == 6
    # redrawn in place: each state of the line follows a return to its start and an erase
    drawn = re.findall(rf"\r\x1b\[2K\[rocmft\] step (\d+)/{total} ", text)
    assert len(set(drawn)) >= 2 and drawn[-1] == str(total), drawn
    assert [int(s) for s in dict.fromkeys(drawn)] == sorted(int(s) for s in set(drawn))  # never backwards
    assert not re.search(rf"\n\[rocmft\] step \d+/{total}  loss", text)  # no plain per-step lines on a terminal
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    # the summary, then the demo's proof (base vs trained answer) and the next commands
    summary_end = max(i for i, line in enumerate(lines) if line.startswith("[rocmft] loss plot "))
    assert any(line.startswith("[rocmft] asked: ") for line in lines[summary_end:]), lines[summary_end:]
    tail = lines[:summary_end + 1][-8:]
    assert tail[0].startswith("[rocmft] done: ") or any(line.startswith("[rocmft] done: ") for line in tail), tail
    assert tail[-1].startswith("[rocmft] loss plot ") and tail[-1].endswith("training_loss.png"), tail
    assert any(line.startswith("[rocmft] tokens/s ") for line in tail)
    assert "INFO" not in text and "%|" not in text  # LLaMA-Factory's/transformers' noise stays in train.log
    log = (run / "train.log").read_text()  # the noise was there, and went to the log: the two checks above can fail
    assert "[INFO|trainer.py" in log and "***** Running training *****" in log and "%|" in log


def test_a_piped_run_prints_a_line_per_step_and_stays_short(trained_run: TrainedRun):
    out, run, total = trained_run.output, trained_run.path, trained_run.max_steps  # `make train ...` 2>&1 | ...
    assert "\r" not in out and "\x1b[" not in out  # no bars, no cursor control
    steps = [int(m) for m in re.findall(rf"^\[rocmft\] step (\d+)/{total}  loss ", out, re.M)]
    assert steps == logged_steps(run) and steps[-1] == total  # one line per logged step, labelled right
    lines = out.splitlines()
    assert len(lines) <= len(steps) + MAX_PIPED_LINES - total, "\n".join(lines)  # the step lines + the bound's rest
    assert lines[-1].startswith("[rocmft] loss plot ") and any(line.startswith("[rocmft] done: ") for line in lines)
    assert "INFO" not in out and "{'loss'" not in out
    assert (run / "output" / "training_loss.png").is_file()
    print(f"piped make train: {len(lines)} lines")


def test_a_bad_dataset_row_shows_the_cause_and_the_log(env, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = (ROOT / "data" / "demo_alpaca.jsonl").read_text().splitlines()[:20]
    (data / "bad.jsonl").write_text("\n".join(rows) + '\n{"instruction": "a row cut short", "output": \n')
    (data / "dataset_info.json").write_text(json.dumps({"bad": {"file_name": "bad.jsonl", "formatting": "alpaca",
                                                                "columns": {"prompt": "instruction", "response": "output"}}}))
    proc = rocmft("train", "tiny-cpu", "--runtime", "local", "--run-name", "badrow", "dataset=bad",
                  f"dataset_dir={data}", env=env)
    run = Path(env["ROCMFT_RUNS"]) / "badrow"
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[-1] == f"[rocmft] full output: {run}/train.log"
    assert lines[-2] == "[rocmft] FAILED (exit code 1): rank 0 (the only process)"
    explained = lines[-32:-2]
    assert any("JSON parse error" in line and "row 20" in line for line in explained), "\n".join(lines[-40:])
    assert any("DatasetGenerationError" in line for line in explained)
    assert len(lines) <= MAX_PIPED_LINES + 5 and "INFO" not in proc.stdout
    assert json.loads((run / "status.json").read_text())["state"] == "failed"
