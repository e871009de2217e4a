"""RESUME= keeps what the interrupted run was asked (issue 42): its resolved recipe, but for the keys given
again, each difference said; a checkpoint past max_steps and another recipe are refused before a run dir."""

from __future__ import annotations

import json

import pytest
import yaml

from rocmft import pipeline
from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes
from rocmft.run import resume, runs
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


def test_a_checkpoint_at_exactly_max_steps_is_refused_one_step_before_it_is_resumed(interrupted, runs_dir):
    """The Trainer stops when global_step reaches max_steps: from checkpoint-1297 of a 1297-step run it would train
    nothing and end as if it had succeeded; of a 1298-step run, one step is left."""
    one_left = pipeline.prepare("tiny-cpu", ["max_steps=1298"], resume="asked", run_name="one", validate=False, env={})
    assert one_left.resume_from.endswith("asked/output/checkpoint-1297")
    with pytest.raises(ProblemReport) as exc:
        pipeline.prepare("tiny-cpu", ["max_steps=1297"], resume="asked", run_name="none", validate=False, env={})
    [error] = exc.value.errors
    assert error.key == "llamafactory.max_steps" and error.message.startswith("1297, but RESUME starts at step 1297")
    assert not (runs_dir / "none").exists()


def test_a_key_inside_a_block_or_a_whole_block_given_again_wins_over_the_run_s(interrupted):
    """The run had `watchdog: false` (one leaf); the command asks one watchdog threshold: the watchdog is the
    recipe file's with that threshold, not the run's `false` with the threshold alone. The run had
    env.MY_FLAG=1; the command gives the whole `env` block: the block is the command's."""
    asked = ["watchdog.loss_rise_factor=3", 'env={"OTHER": "2"}']
    carried, said = resume.carried(interrupted, recipes.load("tiny-cpu", asked), asked)
    again = recipes.load("tiny-cpu", carried + asked)
    watchdog = {**recipes.load("tiny-cpu").watchdog, "loss_rise_factor": 3}  # the file's min_steps, the defaults
    assert dict(again.watchdog) == watchdog and watchdog["min_steps"] == 2
    assert again.env == {"OTHER": "2"} and again.llamafactory["dataset"] == "demo_sharegpt"
    changed = [p.message for p in said[1:]]
    assert changed == [f'env.MY_FLAG: "1" in {interrupted} -> (not set) now (set on this command line)',
                       f'env.OTHER: (not set) in {interrupted} -> "2" now (set on this command line)',
                       f"watchdog: false in {interrupted} -> {json.dumps(watchdog)} now (set on this command line)"]
    assert "watchdog" not in said[0].message and "env." not in said[0].message


def test_the_description_a_copy_rewrote_is_no_setting_of_the_run(interrupted):
    """`make copy` rewrites a run dir's recipe description; resuming keeps the recipe file's and says nothing of it."""
    resolved = yaml.safe_load((interrupted / "recipe.resolved.yaml").read_text())
    resolved["description"] = "a copy of tiny-cpu, edited"
    (interrupted / "recipe.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    carried, said = resume.carried(interrupted, recipes.load("tiny-cpu"), [])
    again = recipes.load("tiny-cpu", carried)
    assert again.description == recipes.load("tiny-cpu").description != "a copy of tiny-cpu, edited"
    assert not [o for o in carried if o.startswith("description")]
    assert "description=" not in said[0].message and "edited" not in said[0].message


def test_a_newer_checkpoint_cut_short_is_skipped_with_a_warning_naming_it(interrupted):
    """A node that died mid-save leaves checkpoint-1300 half written: RESUME takes 1297 and says why not 1300."""
    from tests.unit.run.test_checkpoints import cut

    cut(fake_checkpoint(interrupted / "output" / "checkpoint-1300", 1300) / "optimizer.pt")
    prep = pipeline.prepare("tiny-cpu", resume="asked", run_name="again", validate=False, env={})
    assert prep.resume_from.endswith("asked/output/checkpoint-1297")
    [warning] = [m for m in prep.messages if m.severity == "warning" and m.key == "RESUME"]
    assert warning.message.startswith(f"{interrupted}/output/checkpoint-1300 is incomplete (")
    assert warning.message.endswith("): skipped")


def test_a_resumed_run_records_the_run_it_was_started_from(runs_dir):
    """A DPO run started FROM= an SFT run, interrupted, then resumed: the resumed run's status names the same SFT
    run as its start (what `make runs` shows and a later resume of it starts from), not nothing."""
    make_run(runs_dir, "sft")
    first = pipeline.prepare("tiny-cpu-dpo", start_from="sft", run_name="dpo", validate=False, env={})
    pipeline.commit(first)
    fake_checkpoint(first.run_dir / "output" / "checkpoint-5", 5)
    again = pipeline.prepare("tiny-cpu-dpo", resume="dpo", run_name="dpo-2", validate=False, env={})
    pipeline.commit(again)
    status = runs.read_status(again.run_dir)
    assert status["from_spec"] == str(runs_dir / "sft") and status["started_from"] == f"{runs_dir}/sft (adapter)"
