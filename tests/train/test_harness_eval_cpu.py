"""`make eval TASKS=` on a copy of the session's `make demo` run (`pytest -m train`): EleutherAI's
lm-evaluation-harness, in this venv, on the tuned model and its base, with the project's own tasks
(eval_tasks/rocmft_demo: the identity question scored by exact match, multiple choice by log-likelihood).

- the group YAML's path evaluates its tasks (the harness alone fails on it: `unhashable type: 'list'`);
- tuned is above base on the identity task by more than the harness's standard errors allow (measured here,
  not a fixed number), and both scores land in eval.json and eval.md with their standard errors;
- `make runs` shows the headline and its change; the held-out report of an earlier `make eval` is kept;
- bad input: an unknown task gets the harness's closest names, a dataset the offline machine lacks names
  `make fetch TASKS=`, both one line, exit 2, nothing evaluated.
A task YAML by its path with LIMIT= is scored on the DPO run of tests/train/test_stages_cpu.py (the demo model is
scored once here, once in the container, once through `make serve`: each compared with this one).
"""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest

from tests.conftest import ROOT, rocmft

pytestmark = pytest.mark.train


def _rows(run):
    return json.loads((run / "eval.json").read_text())["harness"]["rows"]


def test_tuned_is_above_base_on_the_identity_task_beyond_the_standard_errors(harness_evaluated_demo):
    """Asked by the group YAML's path (TASKS=eval_tasks/rocmft_demo/rocmft_demo.yaml): both of its tasks ran."""
    run, _, output = harness_evaluated_demo
    assert "unhashable" not in output
    rows = {(r["task"], r["metric"]): r for r in _rows(run)}
    identity = rows[("rocmft_demo_identity", "exact_match")]
    assert identity["n"] == 8 and identity["base"] is not None and identity["tuned"] is not None
    combined = math.sqrt(identity["base_stderr"] ** 2 + identity["tuned_stderr"] ** 2)
    assert identity["tuned"] - identity["base"] > 1.96 * combined, identity
    assert identity["within_noise"] is False and identity["diff"] == pytest.approx(identity["tuned"] - identity["base"])
    choice = rows[("rocmft_demo_choice", "acc")]
    assert choice["n"] == 6 and choice["tuned"] > choice["base"], choice
    # the job's own lines: base without an adapter, tuned with the demo's, through the harness
    assert re.search(r"\[rocmft\] harness: base = \S*tiny-llama\n", output), output[-2000:]
    assert f"[rocmft] harness: adapter {run}/output merged" in output or \
        re.search(r"\[rocmft\] harness: adapter \S*demo-harness/output merged", output), output[-2000:]


def test_eval_md_holds_both_scores_with_their_standard_errors(harness_evaluated_demo):
    run, _, _ = harness_evaluated_demo
    identity = next(r for r in _rows(run) if r["task"] == "rocmft_demo_identity")
    text = (run / "eval.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| rocmft_demo_identity | exact_match |"))
    assert f"{identity['base']:.4g} ± {identity['base_stderr']:.2g}" in line
    assert f"{identity['tuned']:.4g} ± {identity['tuned_stderr']:.2g}" in line
    assert "## Benchmarks (lm-evaluation-harness)" in text and "standard error" in text


def test_make_runs_shows_the_headline_and_its_change(harness_evaluated_demo):
    run, env, _ = harness_evaluated_demo
    section = json.loads((run / "eval.json").read_text())["harness"]
    head = section["headline"]
    listing = rocmft("runs", env=env).stdout
    line = next(x for x in listing.splitlines() if x.startswith(run.name))
    assert f"harness {head['task']} {head['metric']} {head['tuned']:.3g} ({head['diff']:+.4g})" in line, line


def test_the_held_out_report_and_the_benchmarks_keep_each_other(harness_evaluated_demo, tmp_path):
    """eval.json holds both reports; writing one never drops the other (rocmft.evaluate.report.write)."""
    from rocmft.evaluate import report

    run, _, _ = harness_evaluated_demo
    copy = tmp_path / run.name
    copy.mkdir()
    (copy / "eval.json").write_text((run / "eval.json").read_text())
    held_out = {"run": "x", "data": "held-out", "rows": 2, "base_model": "b", "tuned_model": "t", "template": "llama3",
                "base": {"eval_loss": 2.0}, "tuned": {"eval_loss": 1.0}, "examples": []}
    report.write(copy, held_out)
    both = json.loads((copy / "eval.json").read_text())
    assert both["tuned"]["eval_loss"] == 1.0 and both["harness"]["rows"] == _rows(run)
    assert "| eval_loss |" in (copy / "eval.md").read_text() and "## Benchmarks" in (copy / "eval.md").read_text()


@pytest.mark.parametrize(("tasks", "expected"), [
    ("hellaswg", "`hellaswg` is not an lm-evaluation-harness task or group (the harness's closest: hellaswag"),
    ("arc_easy", "`arc_easy`: its dataset allenai/ai2_arc is not in the Hugging Face cache and this machine cannot "
                 "reach the Hub (make fetch TASKS=arc_easy downloads it"),
])
def test_bad_tasks_are_one_line_exit_2_and_nothing_is_evaluated(harness_evaluated_demo, tasks, expected):
    run, env, _ = harness_evaluated_demo
    before = (run / "eval.json").read_text()
    proc = subprocess.run(["make", "-s", "eval", "RUN=last", f"TASKS={tasks}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr
    if tasks == "arc_easy":
        assert "make fetch TASKS=arc_easy" in errors[0] and "allenai/ai2_arc" in errors[0]
    assert "[rocmft] harness: base =" not in proc.stderr  # no model was loaded
    assert (run / "eval.json").read_text() == before
