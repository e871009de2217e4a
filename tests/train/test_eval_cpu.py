"""`make eval` on a copy of the session's trained tiny-cpu run (`pytest -m train`), as a user runs it after
`make demo`: LLaMA-Factory's own eval and predict passes, base vs tuned, on the rows the run held out.

- the tuned eval loss is below the base's on those rows; perplexity, BLEU-4 and ROUGE are there for both;
- generation stops at N rows (N=8 of the ~15 held out), greedy;
- eval.json and eval.md land in the run dir, and `make runs` shows the tuned eval loss.
"""

from __future__ import annotations

import json
import math
import subprocess

from pathlib import Path

import pytest

from tests.conftest import EVAL_ROWS, ROOT, make_env

pytestmark = pytest.mark.train
ROWS = EVAL_ROWS


@pytest.fixture(scope="module")
def evaluated(evaluated_run):
    """The session's `make eval` of a copy of the trained run (tests/conftest.py: the Docker eval compares with it)."""
    return evaluated_run


def test_the_eval_spec_is_in_no_command_line(evaluated):
    """Every local user reads every command line (`ps`): the real job names a private file that holds its spec
    (the run's models, data and settings), gone when eval.json is written."""
    import re

    *_, seen = evaluated
    jobs = [line for _, line in seen if "-m rocmft.evaluate.job" in line]
    assert jobs and all(re.search(r"--spec-file=\S+$", line) for line in jobs), sorted(seen)  # seen: it can fail
    assert not [line for _, line in seen if "predict_with_generate" in line or '"passes"' in line], sorted(seen)
    spec_file = Path(re.search(r"--spec-file=(\S+)", jobs[0]).group(1))
    assert spec_file.parent.parent == ROOT / ".cache" / "serve" and not spec_file.parent.exists()


def test_the_run_logged_an_eval_loss_curve_while_training(trained_run):
    assert [e for e in trained_run.trainer_log() if "eval_loss" in e], "val_size held rows out: eval_loss is logged"


def test_the_tuned_model_beats_its_base_on_the_held_out_rows(evaluated):
    run, _, out, _ = evaluated
    report = json.loads((run / "eval.json").read_text())
    base, tuned = report["base"], report["tuned"]
    assert tuned["eval_loss"] < base["eval_loss"], out
    for side in (base, tuned):
        assert side["perplexity"] == pytest.approx(math.exp(side["eval_loss"]))
        assert all(isinstance(side[k], float) for k in ("bleu-4", "rouge-1", "rouge-2", "rouge-l")), side
        assert side["generated_rows"] == ROWS
    assert report["data"] == "held-out" and report["base_model"] == "models/tiny-llama"
    assert "adapter" in report["tuned_model"]
    assert report["examples"] and all(set(e) == {"prompt", "reference", "base", "tuned"} for e in report["examples"])
    assert f"eval_loss   {base['eval_loss']:.4g}" in out  # the side-by-side on the terminal


def test_the_markdown_table_and_make_runs_show_it(evaluated):
    run, env, _, _ = evaluated
    table = (run / "eval.md").read_text()
    assert "| metric | base | tuned |" in table and "| bleu-4 |" in table and "**Example 1.**" in table
    tuned = json.loads((run / "eval.json").read_text())["tuned"]["eval_loss"]
    listing = subprocess.run(["make", "-s", "runs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    header, row = listing.stdout.splitlines()[:2]
    assert header.split()[6] == "EVAL" and row.split()[0] == "evaluated"
    assert row.split()[6] == f"{tuned:.4f}"


def test_make_eval_after_the_demo_shows_the_demo_helped(demo_run, tmp_path):
    """The README's first two commands, `make demo` then `make eval RUN=last` (CI ran them once more after
    `make test`; the session's demo run is the same command): on the demo's held-out rows the tuned eval loss is
    below the base's."""
    env = make_env(tmp_path)
    demo_run.copy_to(tmp_path / "runs", "demo")  # eval writes into the run dir: never the shared one
    proc = subprocess.run(["make", "-s", "eval", "RUN=last", "N=2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    report = json.loads((tmp_path / "runs" / "demo" / "eval.json").read_text())
    assert report["data"] == "held-out" and report["tuned"]["eval_loss"] < report["base"]["eval_loss"], report
