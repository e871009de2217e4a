"""RESUME= keeps what the interrupted run was asked (issue 42): its resolved recipe, but for the keys given
again, each difference said; a checkpoint past max_steps and another recipe are refused before a run dir."""

from __future__ import annotations

import json

import pytest
import yaml

from rocmft import pipeline
from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes
from rocmft.run import resume
from tests.unit.run.conftest import make_run
from tests.unit.run.test_checkpoints import fake_checkpoint

ASKED = ["dataset=demo_sharegpt", "max_steps=5000", "save_steps=50", "watchdog=false", "env.MY_FLAG=1"]


@pytest.fixture
def interrupted(runs_dir):
    """A run as `make train RECIPE=tiny-cpu SET="<ASKED>"` leaves it after a Ctrl-C at step 1297."""
    run = make_run(runs_dir, "asked", state="interrupted", adapter=False)
    asked = recipes.load("tiny-cpu", ASKED)
    (run / "recipe.resolved.yaml").write_text(yaml.safe_dump(asked.to_dict(), sort_keys=False))
    fake_checkpoint(run / "output" / "checkpoint-1297", 1297)
    return run


def test_every_key_the_run_was_asked_is_kept(interrupted):
    carried, said = resume.carried(interrupted, recipes.load("tiny-cpu"), [])
    again = recipes.load("tiny-cpu", carried)
    assert again.to_dict() == recipes.load("tiny-cpu", ASKED).to_dict()
    assert again.llamafactory["dataset"] == "demo_sharegpt" and again.watchdog is None and again.env == {"MY_FLAG": "1"}
    [note] = said
    assert note.severity == "note" and note.key == "RESUME"
    assert 'llamafactory.dataset="demo_sharegpt" (recipe file: "demo_alpaca,demo_messages")' in note.message
    assert "llamafactory.max_steps=5000 (recipe file: 12)" in note.message


def test_a_key_given_again_wins_and_each_difference_is_said(interrupted):
    asked = ["max_steps=6000", "learning_rate=5e-4", "save_steps=50"]  # save_steps: given again, the same value
    carried, said = resume.carried(interrupted, recipes.load("tiny-cpu", asked), asked)
    again = recipes.load("tiny-cpu", carried + asked)
    assert again.llamafactory["max_steps"] == 6000 and again.llamafactory["learning_rate"] == 5e-4
    assert again.llamafactory["dataset"] == "demo_sharegpt"  # not given again: the run's
    changed = [p.message for p in said[1:]]
    assert changed == [f"llamafactory.learning_rate: 0.005 in {interrupted} -> 0.0005 now (set on this command line)",
                       f"llamafactory.max_steps: 5000 in {interrupted} -> 6000 now (set on this command line)"]


def test_the_recipe_file_edited_since_changes_nothing(interrupted, tmp_path):
    edited = tmp_path / "tiny-cpu.yaml"  # the file after the run: a key added, a value changed
    text = recipes.find("tiny-cpu").read_text().replace("base: _base/lora.yaml", "base: lora")
    edited.write_text(text.replace("learning_rate: 5.0e-3", "learning_rate: 1.0e-3") + "  neftune_noise_alpha: 5\n")
    carried, _ = resume.carried(interrupted, recipes.load(str(edited)), [])
    again = recipes.load(str(edited), carried).llamafactory
    assert "neftune_noise_alpha" not in again and again["learning_rate"] == 5e-3


def test_prepare_resumes_with_the_run_s_recipe_and_refuses_a_checkpoint_past_max_steps(interrupted, runs_dir):
    prep = pipeline.prepare("tiny-cpu", resume="last", run_name="again", validate=False, env={})
    args = yaml.safe_load(prep.rendered.train_yaml)
    assert (args["dataset"], args["max_steps"], args["save_steps"]) == ("demo_sharegpt", 5000, 50)
    assert args["resume_from_checkpoint"].endswith("asked/output/checkpoint-1297")
    assert any(m.message.startswith(f"last = {interrupted} (tiny-cpu sft, interrupted") for m in prep.messages)
    with pytest.raises(ProblemReport) as exc:
        pipeline.prepare("tiny-cpu", ["max_steps=12"], resume="asked", run_name="past", validate=False, env={})
    [error] = exc.value.errors
    assert error.key == "llamafactory.max_steps" and "RESUME starts at step 1297" in error.message
    assert 'SET="max_steps=N" with N > 1297' in error.line()
    assert not (runs_dir / "past").exists()


def test_another_recipe_is_refused(interrupted):
    with pytest.raises(ProblemReport) as exc:
        pipeline.prepare("tiny-cpu-dpo", resume="asked", run_name="x", validate=False, env={})
    assert [p.line() for p in exc.value.errors] == [
        (f"error: RESUME: {interrupted} trained recipe `tiny-cpu`, not `tiny-cpu-dpo` "
         "(RECIPE=tiny-cpu RESUME=...; to start tiny-cpu-dpo from that run's adapter: FROM=)")]


def test_a_run_without_its_resolved_recipe_is_one_line(interrupted):
    (interrupted / "recipe.resolved.yaml").unlink()
    with pytest.raises(ProblemReport) as exc:
        resume.carried(interrupted, recipes.load("tiny-cpu"), [])
    [line] = str(exc.value).splitlines()
    assert "cannot read the interrupted run's recipe" in line and json.dumps(str(interrupted))[1:-1] in line
