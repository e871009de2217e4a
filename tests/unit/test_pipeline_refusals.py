"""What the planner knows to be wrong never launches (issue 42): `pipeline.prepare` refuses it, one line per
problem, before a run dir, a container or a model load. A model the planner cannot model is no such error."""

from __future__ import annotations

import pytest

from rocmft import pipeline
from rocmft.io.problems import ProblemReport
from rocmft.plan import recipe_errors
from rocmft.recipe import recipes
from rocmft.validate.where import Place


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_the_planner_s_value_errors_whatever_the_model():
    asked = ["lora_rank=0", "per_device_train_batch_size=-1", "model_name_or_path=nobody/unknown-model"]
    assert [(p.key, p.message) for p in recipe_errors(recipes.load("tiny-cpu", asked))] == [
        ("llamafactory.lora_rank", "must be a whole number >= 1, got 0"),
        ("llamafactory.per_device_train_batch_size", "must be a whole number >= 1, got -1")]
    # what the planner cannot model goes ahead unplanned: an unknown model, a method it does not model
    assert recipe_errors(recipes.load("tiny-cpu", ["model_name_or_path=nobody/unknown-model"])) == []
    assert recipe_errors(recipes.load("tiny-cpu", ["finetuning_type=oft"])) == []
    assert recipe_errors(recipes.load("tiny-cpu")) == []


def test_prepare_refuses_them_before_a_run_dir_and_before_a_container(runs_dir):
    asked = []

    def in_a_container(arch):  # RUNTIME=docker validates in the arch's image: never asked for a wrong run
        asked.append(arch.name)
        return Place("docker", "image rocmft:test", stack="image=sha256:0", ref="sha256:0")

    with pytest.raises(ProblemReport) as exc:
        pipeline.prepare("tiny-cpu", ["lora_rank=0"], validate_in=in_a_container, env={})
    assert [p.line() for p in exc.value.problems if p.severity == "error"] == [
        f"error: {recipes.find('tiny-cpu')}: llamafactory.lora_rank: must be a whole number >= 1, got 0"]
    assert asked == ["cpu"] and not runs_dir.exists()  # the place was chosen, nothing was started there
