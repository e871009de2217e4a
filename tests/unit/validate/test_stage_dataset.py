"""A recipe whose `stage` does not train on its dataset's kind is refused before launch, one line naming both."""

import pytest

from rocmft.io import paths
from rocmft.validate import inputs
from tests.conftest import rocmft

PAIRS = "preference-pair (chosen/rejected)"
SUPERVISED = "supervised (prompt and answer)"


@pytest.mark.parametrize("stage,dataset,holds,needs,its_stage", [
    ("dpo", "demo_alpaca", SUPERVISED, PAIRS, "sft"),
    ("sft", "demo_dpo", PAIRS, SUPERVISED, "dpo"),
    ("kto", "demo_dpo", PAIRS, "KTO (labelled answer)", "dpo"),
    ("pt", "demo_messages", SUPERVISED, "plain-text", "sft"),
    ("sft", "demo_text", "plain-text", SUPERVISED, "pt"),
    ("rm", "demo_kto", "KTO (labelled answer)", PAIRS, "kto"),
])
def test_a_dataset_of_another_kind_is_one_problem_naming_stage_and_dataset(stage, dataset, holds, needs, its_stage):
    args = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": stage, "dataset": dataset, "dataset_dir": "data"}
    problems = inputs.check(args, "r.yaml", paths.root(), key_prefix="llamafactory.")
    assert [p.line() for p in problems] == [
        f"error: r.yaml: llamafactory.dataset: dataset `{dataset}` holds {holds} rows, but `stage: {stage}` trains on "
        f"{needs} rows (train it with a `stage: {its_stage}` recipe, or name a dataset of {needs} rows; "
        "`make data` says which kind a file holds)"]


@pytest.mark.parametrize("stage,dataset", [("sft", "demo_alpaca,demo_sharegpt"), ("dpo", "demo_dpo"), ("kto", "demo_kto"),
                                           ("pt", "demo_text"), ("ppo", "demo_messages")])
def test_each_stage_takes_its_own_kind(stage, dataset):
    args = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": stage, "dataset": dataset, "dataset_dir": "data"}
    assert inputs.check(args, "r.yaml", paths.root()) == []


def test_the_eval_dataset_is_checked_too():
    args = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": "dpo", "dataset": "demo_dpo",
            "eval_dataset": "demo_alpaca", "dataset_dir": "data"}
    (problem,) = inputs.check(args, "r.yaml", paths.root())
    assert problem.key == "eval_dataset" and "`demo_alpaca`" in problem.message


def test_train_refuses_an_sft_set_on_a_dpo_recipe_before_anything_runs(job_env, tmp_path, tiny_model):
    proc = rocmft("train", "tiny-cpu-dpo", "--runtime", "local", "dataset=demo_alpaca", env=job_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "demo_alpaca" in x]
    assert line.startswith("error: recipes/tiny-cpu-dpo.yaml -> train.yaml: dataset: dataset `demo_alpaca` holds")
    assert "`stage: dpo`" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
