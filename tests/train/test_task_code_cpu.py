"""A task YAML of lm-evaluation-harness is code (issue 43, N2): `!function utils.x` imports the Python beside it,
and its Jinja templates render in the harness's unsandboxed environment. `make eval TASKS=x.yaml` on a local run
and `make fetch TASKS=x.yaml` ran such code on the host with no opt-in and no warning. Now a task YAML other than
the project's own (eval_tasks/) runs only in the run's container (RUNTIME=docker) or with TRUST_TASK_CODE=1.
And its names reach the terminal escaped (L6): a task named with an escape sequence, evaluated for real.

Each attack is performed through the real CLI: the task's Python, imported, leaves a file behind and fails."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, TrainedRun, make_env, rocmft

pytestmark = pytest.mark.train


def hostile_task(folder: Path) -> tuple[Path, Path]:
    """A task YAML downloaded into `folder`, its `!function` in utils.py beside it: (the YAML, what it leaves)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "ran-on-this-host"
    (folder / "utils.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('id')\n"
                                     "raise SystemExit('the task file ran its code')\n")
    task = folder / "evil.yaml"
    task.write_text((ROOT / "eval_tasks" / "rocmft_demo" / "identity.yaml").read_text()
                    .replace("task: rocmft_demo_identity", "task: evil")
                    .replace('doc_to_text: "{{question}}"', "doc_to_text: !function utils.doc_to_text")
                    .replace("eval_tasks/rocmft_demo/identity.jsonl", str(ROOT / "eval_tasks/rocmft_demo/identity.jsonl")))
    return task, marker


@pytest.fixture
def run(trained_run: TrainedRun, tmp_path) -> tuple[Path, dict[str, str]]:
    env = make_env(tmp_path)
    env.pop("TRUST_TASK_CODE", None)
    return trained_run.copy_to(tmp_path / "runs", "task-code"), env


@pytest.mark.parametrize("command", ["eval", "fetch"])
def test_a_task_yaml_from_elsewhere_never_runs_its_code_on_the_host_without_the_opt_in(command, run, tmp_path):
    run_dir, env = run
    task, marker = hostile_task(tmp_path / "Downloads")
    argv = ["eval", str(run_dir), "--tasks", str(task), "--limit", "1", "--runtime", "local"] if command == "eval" \
        else ["fetch", "--tasks", str(task), "--runtime", "local"]
    proc = rocmft(*argv, env=env, timeout=600)
    assert not marker.exists(), f"make {command} ran the task file's Python on the host:\n{proc.stderr[-1500:]}"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "TRUST_TASK_CODE=1" in line and str(task) in line, line


def test_task_names_from_a_task_file_reach_the_terminal_escaped(run, tmp_path):
    """L6 again: the task's own name, with an OSC sequence that retitles the terminal and a colour change, as the
    harness reports it for the base and the tuned model (the opt-in given: the task is the user's to trust)."""
    run_dir, env = run
    folder = tmp_path / "mine"
    folder.mkdir()
    task = folder / "named.yaml"
    task.write_text((ROOT / "eval_tasks" / "rocmft_demo" / "identity.yaml").read_text()
                    .replace("task: rocmft_demo_identity", 'task: "named\\e]0;owned\\a\\e[31m"')
                    .replace("eval_tasks/rocmft_demo/identity.jsonl", str(ROOT / "eval_tasks/rocmft_demo/identity.jsonl")))
    proc = rocmft("eval", str(run_dir), "--tasks", str(task), "--limit", "1", "--runtime", "local",
                  env={**env, "TRUST_TASK_CODE": "1"}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    shown = proc.stdout + proc.stderr
    assert "\x1b" not in shown and "\x07" not in shown, repr([x for x in shown.splitlines() if "named" in x])
    assert any("named\\x1b]0;owned\\x07\\x1b[31m" in line for line in proc.stdout.splitlines()), proc.stdout
    section = json.loads((run_dir / "eval.json").read_text())["harness"]  # the data keeps the name as it is
    assert [r["task"] for r in section["rows"]] == ["named\x1b]0;owned\x07\x1b[31m"]
