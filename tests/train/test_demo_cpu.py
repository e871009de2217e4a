"""`make demo` as a new user runs it (issue 23): the tiny model learns the identity answer with LoRA, the loss
falls by well over half, and the end shows the base and the trained answer to the demo question (greedy, so
deterministic) and the next commands. The run is the session's `demo_run` (tests/conftest.py)."""

from __future__ import annotations

import re

import pytest
import yaml

from rocmft.data.demo_content import DEMO_QUESTION, IDENTITY_ANSWER

pytestmark = pytest.mark.train


def _answer(output: str, who: str) -> str:
    found = re.findall(rf"^  {who}\s*: (.*)$", output, re.MULTILINE)
    assert len(found) == 1, output[-3000:]
    return found[0]


def test_demo_answers_the_taught_sentence_and_the_base_model_does_not(demo_run):
    assert f"[rocmft] asked: {DEMO_QUESTION}" in demo_run.output
    assert _answer(demo_run.output, "trained") == IDENTITY_ANSWER
    base = _answer(demo_run.output, "base model")
    assert base.strip() and base != IDENTITY_ANSWER


def test_demo_loss_falls_by_well_over_half_with_lora(demo_run):
    """First logged loss against the mean of the last five: one step's batch mixes memorised identity rows with
    harder demo rows in varying shares, so a single last step says less than the trend."""
    train = yaml.safe_load((demo_run.path / "train.yaml").read_text())
    assert train["finetuning_type"] == "lora" and "demo_identity" in train["dataset"]
    losses = demo_run.losses()
    assert len(losses) == demo_run.max_steps // train.get("logging_steps", 1)
    tail = sum(losses[-5:]) / 5
    assert tail < losses[0] / 2, losses


def test_demo_ends_with_the_next_commands(demo_run):
    last = demo_run.output.strip().splitlines()[-1]
    assert "make chat RUN=last" in last and "make eval RUN=last" in last, last


def test_a_piped_demo_stays_under_40_lines_with_the_first_and_last_step(demo_run):
    """60 steps piped: a line every few steps (src/rocmft/launch/terminal.py PLAIN_STEP_LINES), the first and the
    last always, in order; the summary and the answers unchanged around them."""
    lines = demo_run.output.splitlines()
    total = demo_run.max_steps
    shown = [int(m) for m in re.findall(rf"^\[rocmft\] step (\d+)/{total}  loss ", demo_run.output, re.M)]
    assert total > 40 and shown[0] == 1 and shown[-1] == total and shown == sorted(set(shown)), shown
    assert len(lines) < 40, "\n".join(lines)
    assert any(line.startswith("[rocmft] done: ") for line in lines) and "\r" not in demo_run.output
    print(f"piped make demo: {len(lines)} lines, {len(shown)} of {total} steps shown")
