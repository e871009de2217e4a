"""FROM=: a DPO run starts from an SFT run's merged export or adapter (or a folder), with the SFT model as its
reference; chat, serve and export of the DPO run load what it stands on. Run dirs written by hand."""

from __future__ import annotations

import json

import pytest
import yaml

from rocmft import pipeline
from rocmft.cli import export
from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes
from rocmft.run import chain, runs, target
from tests.unit.run.conftest import make_run
from tests.unit.run.test_checkpoints import fake_checkpoint


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs"


def dpo(*overrides):
    return recipes.load("tiny-cpu-dpo", list(overrides))


def test_from_a_run_s_adapter_merges_it_and_trains_a_new_one_on_its_model_and_template(runs_dir):
    make_run(runs_dir, "sft", template="qwen")
    start = chain.resolve("sft", dpo())
    assert start.overrides == ["model_name_or_path=models/tiny-llama", "template=qwen",
                               f"adapter_name_or_path={runs_dir}/sft/output", "create_new_adapter=true"]
    assert start.spec == str(runs_dir / "sft") and start.source.endswith("sft (adapter)")
    assert [n.key for n in start.notes] == ["llamafactory.template"]  # llama3 replaced by qwen, said once
    assert chain.resolve("last", dpo()).overrides == start.overrides


def test_from_a_run_s_merged_export_the_export_is_the_model(runs_dir):
    make_run(runs_dir, "sft", merged=True)
    start = chain.resolve("sft", dpo("deepspeed=zero3", "gpus_per_node=2"))  # no adapter: fine under ZeRO-3
    assert start.overrides == [f"model_name_or_path={runs_dir}/sft/merged", "template=llama3"]


def test_an_adapter_under_zero3_or_into_a_full_fine_tune_is_refused_with_the_export_route(runs_dir):
    make_run(runs_dir, "sft")
    for overrides in (("deepspeed=zero3", "gpus_per_node=2"), ("finetuning_type=full",)):
        with pytest.raises(ProblemReport) as info:
            chain.resolve("sft", dpo(*overrides))
        (problem,) = info.value.problems
        assert problem.key == "FROM" and "make export RUN=sft" in problem.suggestion


def test_from_a_run_that_stopped_early_its_last_checkpoint_with_a_note(runs_dir):
    make_run(runs_dir, "cut", state="interrupted", adapter=False, checkpoints=(3, 6))
    start = chain.resolve("cut", dpo())
    assert f"adapter_name_or_path={runs_dir}/cut/output/checkpoint-6" in start.overrides
    assert any("before its final save" in n.message for n in start.notes)


def test_from_a_folder_or_nothing(tmp_path, runs_dir):
    adapter, model = tmp_path / "adapter", tmp_path / "model"
    adapter.mkdir(), model.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (model / "config.json").write_text("{}")
    assert chain.resolve(str(adapter), dpo()).overrides == [f"adapter_name_or_path={adapter}", "create_new_adapter=true"]
    assert chain.resolve(str(model), dpo()).overrides == [f"model_name_or_path={model}"]
    with pytest.raises(ProblemReport, match="neither a run nor a folder"):
        chain.resolve(str(tmp_path / "nothing"), dpo())
    with pytest.raises(ProblemReport) as info:
        chain.resolve("nope", dpo())
    assert info.value.problems[0].key == "FROM"


def test_the_dpo_run_renders_the_chain_and_records_where_it_started(runs_dir):
    make_run(runs_dir, "sft")
    prep = pipeline.prepare("tiny-cpu-dpo", start_from="last", run_name="dpo", validate=False)
    args = yaml.safe_load(prep.rendered.train_yaml)
    assert args["adapter_name_or_path"] == f"{runs_dir}/sft/output" and args["create_new_adapter"] is True
    assert args["stage"] == "dpo" and args["dataset"] == "demo_dpo"
    pipeline.commit(prep)
    status = runs.read_status(prep.run_dir)
    assert status["from_spec"] == str(runs_dir / "sft") and status["stage"] == "dpo"
    # a DPO run resumed later starts from the same SFT run, not from whatever `last` is then
    make_run(runs_dir, "newer-sft", adapter=True)
    fake_checkpoint(prep.run_dir / "output" / "checkpoint-5", 5)
    resumed = pipeline.prepare("tiny-cpu-dpo", resume="dpo", run_name="dpo-2", validate=False)
    assert yaml.safe_load(resumed.rendered.train_yaml)["adapter_name_or_path"] == f"{runs_dir}/sft/output"


def test_chat_serve_and_export_of_a_chained_run_load_the_sft_adapter_then_its_own(runs_dir):
    make_run(runs_dir, "dpo", stage="dpo", adapter_name_or_path="runs/sft/output", create_new_adapter=True)
    t = target.load(runs_dir / "dpo")
    assert t.adapter == f"runs/sft/output,{runs_dir}/dpo/output" and t.model == "models/tiny-llama"
    train = yaml.safe_load((runs_dir / "dpo" / "train.yaml").read_text())
    assert export.export_config(train, "runs/dpo")["adapter_name_or_path"] == "runs/sft/output,runs/dpo/output"
    plain = make_run(runs_dir, "plain")
    assert target.load(plain).adapter == f"{runs_dir}/plain/output"
    assert chain.upstream_adapters({"adapter_name_or_path": "a, b"}) == []  # resumed adapters are not stacked
    assert json.loads(json.dumps(chain.upstream_adapters({"adapter_name_or_path": ["a", "b"], "create_new_adapter": True}))) == ["a", "b"]
