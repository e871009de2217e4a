"""What `make eval` runs, as data: LLaMA-Factory's arguments for each pass (base and tuned, loss and predict),
read from the run's files; bad input one line each. No model is loaded here."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from rocmft.evaluate import plan, report
from rocmft.hardware import arches
from rocmft.io.problems import ProblemReport
from rocmft.run import target
from rocmft.serve import docker, private_file
from tests.unit.launch.test_docker_spec import mi300x_node
from tests.unit.run.conftest import make_run

REGISTRY = {"demo_alpaca": {"file_name": "demo_alpaca.jsonl"}, "demo_dpo": {"file_name": "d.jsonl", "ranking": True}}


def build(run, **kw):
    train = yaml.safe_load((run / "train.yaml").read_text())
    kw.setdefault("rows", 50)
    kw.setdefault("data", None)
    return plan.build(target.load(run), train, registry=REGISTRY, **kw)


def only_error(exc) -> str:
    lines = str(exc.value).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_held_out_rows_are_the_runs_own_split_base_without_the_adapter_tuned_with_it(runs_dir):
    run = make_run(runs_dir, "r", val_size=0.1, seed=7, cutoff_len=128, dataset="demo_alpaca,demo_messages",
                   max_samples=500, learning_rate=1.0e-4)
    p = build(run)
    assert list(p.passes) == ["base.loss", "base.predict", "tuned.loss", "tuned.predict"]
    base, tuned = p.passes["base.loss"], p.passes["tuned.loss"]
    # the same raw rows, split the same way as in training (LLaMA-Factory splits before tokenising)
    for args in p.passes.values():
        assert {k: args[k] for k in ("dataset", "val_size", "seed", "max_samples", "cutoff_len")} == {
            "dataset": "demo_alpaca,demo_messages", "val_size": 0.1, "seed": 7, "max_samples": 500, "cutoff_len": 128}
        assert args["stage"] == "sft" and args["do_train"] is False and args["template"] == "llama3"
        assert "learning_rate" not in args and "output_dir" not in args  # training keys stay behind
        assert args["flash_attn"] == "sdpa"  # shapes the model: as trained
    assert base["model_name_or_path"] == "models/tiny-llama" and "adapter_name_or_path" not in base
    assert tuned["adapter_name_or_path"] == f"{runs_dir}/r/output" and tuned["finetuning_type"] == "lora"
    assert base["do_eval"] and "predict_with_generate" not in base  # the loss: rows tokenised as in training
    predict = p.passes["tuned.predict"]
    assert predict["do_predict"] and predict["predict_with_generate"] and predict["do_sample"] is False
    assert "do_eval" not in predict
    assert json.loads(json.dumps(p.spec()))["rows"] == 50


def test_a_merged_export_is_the_tuned_model_and_the_trained_base_the_base(runs_dir):
    p = build(make_run(runs_dir, "r", merged=True, val_size=0.05))
    assert p.passes["tuned.loss"]["model_name_or_path"] == f"{runs_dir}/r/merged"
    assert "adapter_name_or_path" not in p.passes["tuned.loss"]
    assert p.passes["base.loss"]["model_name_or_path"] == "models/tiny-llama"


def test_data_evaluates_a_registered_dataset_instead_of_the_split(runs_dir):
    p = build(make_run(runs_dir, "r", val_size=0.1, max_samples=9), data="demo_alpaca", rows=5)
    for args in p.passes.values():
        assert args["eval_dataset"] == "demo_alpaca"
        assert not {"dataset", "val_size", "max_samples"} & set(args)  # LLaMA-Factory refuses val_size + eval_dataset
    assert p.data == "demo_alpaca" and p.spec()["rows"] == 5


def test_a_dpo_run_is_evaluated_on_an_sft_dataset_it_names(runs_dir):
    run = make_run(runs_dir, "r", stage="dpo", dataset="demo_dpo", val_size=0.1)
    with pytest.raises(ProblemReport) as exc:
        build(run)
    assert "is a dpo run: its held-out rows are preference pairs" in only_error(exc)
    with pytest.raises(ProblemReport) as exc:
        build(run, data="demo_dpo")
    assert "`demo_dpo` is preference pairs" in only_error(exc)
    p = build(run, data="demo_alpaca")
    assert p.passes["tuned.predict"]["stage"] == "sft"


def test_unregistered_data_is_one_line_with_the_closest_name(runs_dir):
    with pytest.raises(ProblemReport) as exc:
        build(make_run(runs_dir, "r", val_size=0.1), data="demo_alpacca")
    assert only_error(exc) == ("error: DATA: `demo_alpacca` is not a registered dataset in data/dataset_info.json "
                               "(did you mean `demo_alpaca`?)")


def test_a_run_that_held_nothing_out_needs_data(runs_dir):
    with pytest.raises(ProblemReport) as exc:
        build(make_run(runs_dir, "r"))
    assert "held no rows out (its train.yaml has no val_size)" in only_error(exc)


@pytest.mark.parametrize("value", ["0", "-3", "ten", "2.5", " "])
def test_rows_must_be_a_positive_whole_number(value):
    if not value.strip():
        assert plan.parse_rows(value) == plan.DEFAULT_ROWS
        return
    with pytest.raises(ProblemReport) as exc:
        plan.parse_rows(value)
    assert only_error(exc).startswith(f"error: N: `{value}` is not a positive whole number")


def test_the_report_puts_base_and_tuned_side_by_side(runs_dir, tmp_path):
    p = build(make_run(runs_dir, "r", val_size=0.1))
    pred = [{"prompt": "Who are you?", "label": "rocmft", "predict": "x"}]
    results = {
        "base.loss": {"metrics": {"eval_loss": 7.5}, "predictions": []},
        "base.predict": {"metrics": {"predict_bleu-4": 1.0, "predict_rouge-l": 2.0}, "predictions": pred, "rows": 4},
        "tuned.loss": {"metrics": {"eval_loss": 4.0}, "predictions": []},
        "tuned.predict": {"metrics": {"predict_bleu-4": 20.0, "predict_rouge-l": 30.0},
                          "predictions": [{**pred[0], "predict": "rocmft"}], "rows": 4}}
    r = report.build(p, results)
    assert r["base"]["perplexity"] == pytest.approx(math.exp(7.5)) and r["tuned"]["eval_loss"] == 4.0
    assert r["tuned"]["bleu-4"] == 20.0 and r["base"]["rouge-2"] is None and r["tuned"]["generated_rows"] == 4
    assert r["examples"] == [{"prompt": "Who are you?", "reference": "rocmft", "base": "x", "tuned": "rocmft"}]
    _json_path, md_path = report.write(tmp_path, r)
    assert report.tuned_loss(tmp_path) == 4.0
    assert "| eval_loss | 7.5 | 4 |" in md_path.read_text() and "- tuned: rocmft" in md_path.read_text()
    assert report.tuned_loss(tmp_path / "nothing") is None


def test_in_docker_the_job_is_the_checkouts_module_in_the_arch_container_without_a_network_port(runs_dir):
    """RUNTIME=docker as data (no GPU here): the arch's training container, the run dirs read-only (the host
    writes eval.json from the job's stdout), the mounted checkout's rocmft on PYTHONPATH."""
    from rocmft.cli import eval as cli_eval

    make_run(runs_dir, "r1", arch="gfx942", runtime="docker", val_size=0.1)
    args = type("A", (), {"run": "r1", "rows": "7", "data": None, "runtime": None, "gpus": None})()
    s, built = cli_eval.plan_for(args, env={})
    with private_file.holding(json.dumps(built.spec())) as spec_file:
        job = cli_eval.job(s, built, str(spec_file))
        spec = docker.container(job, arches.table()["gfx942"], mi300x_node(runs_dir=str(runs_dir)),
                                image="rocmft:gfx942", caller_env={"HF_HOME": "/data/hf"}, launcher_pid=1)
        # the spec in a private file, not in argv (`ps`): tests/unit/serve/test_private_file.py
        assert spec.command == ("python", "-m", "rocmft.evaluate.job", f"--spec-file={spec_file}")
        assert json.loads(spec_file.read_text())["rows"] == 7
    assert spec.environment["PYTHONPATH"] == "src" and spec.network_mode is None
    assert spec.devices == ("/dev/kfd", *(f"/dev/dri/renderD{128 + i}" for i in range(8)))  # the gfx942 GPUs
    assert [m.read_only for m in spec.mounts if m.source == str(runs_dir)] == [True]
    assert spec.labels["ai.rocmft.serve"] == "eval"


def test_generation_rows_are_cut_after_llamafactorys_split_not_before():
    """The job caps the eval rows LLaMA-Factory's get_dataset returns (its max_samples would cut the raw rows
    before the split and so hold out other rows)."""
    datasets = pytest.importorskip("datasets", reason="the CPU training stack (make setup) is not installed")
    from rocmft.evaluate.job import _loader

    held_out = datasets.Dataset.from_dict({"input_ids": [[i] for i in range(15)]})
    loader = _loader(lambda *a, **k: {"train_dataset": None, "eval_dataset": held_out}, 8, {})
    assert loader()["eval_dataset"]["input_ids"] == [[i] for i in range(8)]  # the first 8 of the split, in order
    assert _loader(lambda: {"eval_dataset": held_out}, 50, {})()["eval_dataset"] is held_out


def test_held_out_rows_that_are_training_rows_are_counted_token_for_token():
    datasets = pytest.importorskip("datasets", reason="the CPU training stack (make setup) is not installed")
    from rocmft.evaluate.job import _loader

    train = datasets.Dataset.from_dict({"input_ids": [[1, 2], [3, 4], [5]]})
    held = datasets.Dataset.from_dict({"input_ids": [[3, 4], [4, 3], [5], [5, 6]]})
    found: dict = {}
    _loader(lambda: {"train_dataset": train, "eval_dataset": held}, None, found)()
    assert found == {"held_out_rows": 4, "held_out_copies": 2}
    found.clear()
    _loader(lambda: {"train_dataset": None, "eval_dataset": held}, None, found)()  # DATA=: nothing trained here
    assert found == {"held_out_rows": 4, "held_out_copies": None}
