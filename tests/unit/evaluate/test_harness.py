"""The harness's plan (evaluate/harness_plan.py) and report (evaluate/harness_report.py), pure: what the job is
handed for each side, the command line's problems all at once, and how two sides become rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmft.evaluate import harness_plan, harness_report
from rocmft.io.problems import ProblemReport
from rocmft.run.target import Target


def _target(adapter: str | None, model: str = "models/base", source: str = "adapter") -> Target:
    return Target(Path("runs/r"), "runs/r", "r", "cpu", "local", model, adapter, "llama3", source)


def _settings(tmp_path, tasks="rocmft_demo", limit=None, fewshot=None):
    return harness_plan.settings(tasks=tasks, limit=limit, fewshot=fewshot, root=tmp_path)


def test_tuned_merges_the_whole_chain_in_order_base_none(tmp_path):
    chain = "runs/sft/output,runs/dpo/output"
    plan = harness_plan.build(_target(chain), {"model_name_or_path": "models/base"}, _settings(tmp_path), gpu=False)
    assert plan.sides["base"]["adapters"] == [] and plan.sides["base"]["model"] == "models/base"
    assert plan.sides["tuned"]["adapters"] == ["runs/sft/output", "runs/dpo/output"]
    # the tokenizer (and its chat template) is the last adapter's, the same for both sides
    assert plan.sides["base"]["tokenizer"] == plan.sides["tuned"]["tokenizer"] == "runs/dpo/output"
    assert (plan.batch_size, plan.device) == (harness_plan.CPU_BATCH, "cpu")


def test_a_merged_export_is_tuned_as_is_and_its_base_is_what_it_trained_from(tmp_path):
    plan = harness_plan.build(_target(None, "runs/r/merged", "merged"), {"model_name_or_path": "org/base"},
                              _settings(tmp_path), gpu=True)
    assert plan.sides["tuned"] == {"model": "runs/r/merged", "adapters": [], "tokenizer": "runs/r/merged",
                                   "trust_remote_code": False}
    assert plan.sides["base"]["model"] == "org/base"
    assert (plan.batch_size, plan.device) == ("auto", "cuda")


def test_task_files_become_include_paths_names_stay_names(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "mine.yaml").write_text("task: mine\n")
    chosen = _settings(tmp_path, tasks="mmlu, evals/mine.yaml,mmlu", limit="5", fewshot="0")
    assert chosen.tasks == ("mmlu",) and chosen.task_files == ("evals/mine.yaml",)
    assert chosen.include_paths == (harness_plan.SHIPPED_TASKS, "evals")
    assert (chosen.limit, chosen.fewshot) == (5, 0)


def test_every_problem_of_the_command_line_at_once(tmp_path):
    with pytest.raises(ProblemReport) as caught:
        _settings(tmp_path, tasks="evals/none.yaml", limit="0", fewshot="-1")
    keys = [p.key for p in caught.value.problems]
    assert keys == ["TASKS", "LIMIT", "FEWSHOT"], caught.value.problems
    assert "no such task file" in caught.value.problems[0].message


def test_no_task_is_a_problem(tmp_path):
    with pytest.raises(ProblemReport) as caught:
        _settings(tmp_path, tasks=" , ")
    assert caught.value.problems[0].key == "TASKS" and "TASKS=mmlu" in caught.value.problems[0].suggestion


def _side(value, stderr, n=100):
    return {"results": {"t": {"alias": "t", "acc,none": value, "acc_stderr,none": stderr}},
            "n_samples": {"t": {"effective": n}}, "higher_is_better": {"t": {"acc": True}}}


@pytest.mark.parametrize(("base", "tuned", "noise"), [
    ((0.50, 0.05), (0.60, 0.05), True),   # 0.10 <= 1.96 x 0.0707 = 0.139
    ((0.50, 0.02), (0.60, 0.02), False),  # 0.10 >  1.96 x 0.0283 = 0.055
    ((0.60, 0.02), (0.50, 0.02), False),  # a real loss is no noise either
])
def test_within_noise_is_the_difference_against_both_errors(base, tuned, noise):
    (row,) = harness_report.rows(_side(*base), _side(*tuned))
    assert row["within_noise"] is noise
    assert row["diff"] == pytest.approx(tuned[0] - base[0])
    assert (row["base"], row["tuned"], row["n"]) == (base[0], tuned[0], 100)


def test_headline_names_the_first_tasks_metric_and_its_change():
    section = {"headline": {"task": "t", "metric": "acc", "tuned": 0.6, "diff": 0.1}}
    assert harness_report.headline(section) == "t acc 0.6 (+0.1)"
    assert harness_report.headline(None) == "" and harness_report.headline({"headline": None}) == ""


def test_a_qlora_run_and_an_outside_yaml_in_a_container_are_refused(tmp_path):
    outside = tmp_path.parent / "outside-task.yaml"
    outside.write_text("task: x\n")
    try:
        chosen = _settings(tmp_path, tasks=str(outside))
    finally:
        outside.unlink()
    target = Target(Path("runs/q"), "runs/q", "q", "cpu", "docker", "models/base", "runs/q/output", "llama3",
                    "adapter", {"quantization_bit": 4})
    keys = [p.key for p in harness_plan.where_problems(target, chosen, "docker", tmp_path, {})]
    assert keys == ["RUN", "TASKS"]
    # locally, the same file is code from elsewhere (issue 43, N2): only with TRUST_TASK_CODE=1
    [local] = harness_plan.where_problems(_target("runs/r/output"), chosen, "local", tmp_path, {})
    assert "from outside eval_tasks/" in local.message and "TRUST_TASK_CODE=1" in local.suggestion
    assert harness_plan.where_problems(_target("runs/r/output"), chosen, "local", tmp_path, {"TRUST_TASK_CODE": "1"}) == []


def _section(tmp_path, tasks: str, task: str, limit=None) -> dict:
    """A harness section as the report builds it from lm_eval's results of both sides (one accuracy each)."""
    plan = harness_plan.build(_target("runs/r/output"), {"model_name_or_path": "models/base"},
                              _settings(tmp_path, tasks=tasks, limit=limit), gpu=False)

    def side(acc: float) -> dict:
        return {"results": {task: {"acc,none": acc, "acc_stderr,none": 0.1}}, "n-samples": {task: {"effective": 3}},
                "lm_eval": "0.4.13"}
    return harness_report.build(plan, {"base": side(0.25), "tuned": side(0.75)})


def test_a_later_harness_section_replaces_the_earlier_one_and_keeps_the_held_out_report(tmp_path):
    """`make eval TASKS=a`, then `make eval TASKS=b LIMIT=3`: eval.json holds b's benchmarks only (a's rows beside
    them would read as b's run), and the held-out report of an earlier `make eval` stays."""
    import json

    from rocmft.evaluate import report

    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "mine.yaml").write_text("task: mine\n")
    held_out = {"run": "r", "data": "held-out", "rows": 2, "base_model": "b", "tuned_model": "t", "template": "llama3",
                "base": {"eval_loss": 2.0}, "tuned": {"eval_loss": 1.0}, "examples": []}
    report.write(tmp_path, held_out)
    report.write(tmp_path, harness=_section(tmp_path, "rocmft_demo", "rocmft_demo_choice"))
    report.write(tmp_path, harness=_section(tmp_path, "evals/mine.yaml", "mine", limit="3"))
    written = json.loads((tmp_path / "eval.json").read_text())
    assert written["harness"]["tasks"] == ["evals/mine.yaml"] and written["harness"]["limit"] == 3
    assert [(r["task"], r["base"], r["tuned"]) for r in written["harness"]["rows"]] == [("mine", 0.25, 0.75)]
    assert written["tuned"]["eval_loss"] == 1.0 and report.tuned_loss(tmp_path) == 1.0
    text = (tmp_path / "eval.md").read_text()
    assert "| mine | acc |" in text and "rocmft_demo_choice" not in text and "| eval_loss | 2 | 1 |" in text
