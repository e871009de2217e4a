"""The one wording of an unknown harness task (make eval TASKS=, make fetch TASKS=), and the listing command it
suggests run for real with the pinned harness."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rocmft.evaluate import harness_names
from tests.conftest import PYTHON, ROOT, offline_env


def test_a_close_name_is_offered_and_a_far_one_gets_the_listing_command():
    known = ["arc_easy", "arc_challenge", "hellaswag"]
    assert harness_names.unknown("arc_esy", known) == \
        "`arc_esy` is not an lm-evaluation-harness task or group (the harness's closest: arc_easy)"
    assert harness_names.unknown("zzzz", known) == \
        "`zzzz` is not an lm-evaluation-harness task or group (`lm-eval ls tasks` lists them all)"


def test_the_suggested_listing_command_lists_tasks_with_the_pinned_harness(tmp_path):
    """`lm-eval ls tasks` as a user would type it (the venv's console script), the project's tasks included."""
    lm_eval = Path(PYTHON).parent / harness_names.LIST_COMMAND.split()[0]
    proc = subprocess.run([str(lm_eval), *harness_names.LIST_COMMAND.split()[1:], "--include_path",
                           str(ROOT / "eval_tasks")], env=offline_env(tmp_path), capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rocmft_demo" in proc.stdout and "hellaswag" in proc.stdout, proc.stdout[-2000:]
