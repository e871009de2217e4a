"""A run dir -> what chat/serve load: read from the run's files, never guessed; bad runs are one line each."""

from __future__ import annotations


import pytest

from rocmft.io.problems import ProblemReport
from rocmft.run import target
from tests.unit.run.conftest import make_run


def load(run):
    return target.load(run)


def only_error(exc) -> str:
    lines = str(exc.value).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_lora_run_is_base_model_plus_its_adapter_with_its_template(runs_dir):
    t = load(make_run(runs_dir, "r"))
    assert (t.model, t.adapter, t.template, t.source) == ("models/tiny-llama", f"{runs_dir}/r/output", "llama3", "adapter")
    assert t.arch == "cpu" and t.trained_runtime == "local" and t.notes == ()
    assert t.carried == {"flash_attn": "sdpa"}  # shapes the model: the same at inference


def test_a_merged_export_is_preferred_and_loaded_without_the_adapter(runs_dir):
    t = load(make_run(runs_dir, "r", merged=True, quantization_bit=4))
    assert (t.model, t.adapter, t.source) == (f"{runs_dir}/r/merged", None, "merged")
    assert "quantization_bit" not in t.carried  # the merged weights are not a quantized base


def test_interrupted_after_a_save_uses_the_last_checkpoint_and_says_so(runs_dir):
    t = load(make_run(runs_dir, "r", state="interrupted", adapter=False, checkpoints=(6, 12)))
    assert t.adapter == f"{runs_dir}/r/output/checkpoint-12" and t.source == "checkpoint"
    assert [n.severity for n in t.notes] == ["note"] and "interrupted before its final save" in t.notes[0].line()


def test_a_run_with_no_adapter_is_refused_in_one_line(runs_dir):
    with pytest.raises(ProblemReport) as exc:
        load(make_run(runs_dir, "r", state="failed", adapter=False))
    assert only_error(exc) == (f"error: RUN: {runs_dir}/r has no adapter to load: the run ended failed before its "
                               "first save (it saves every 6 steps) (pick a run that saved one: `make runs`)")


def test_a_run_without_a_template_is_refused_not_guessed(runs_dir):
    with pytest.raises(ProblemReport) as exc:
        load(make_run(runs_dir, "r", template=None))
    assert "names no chat template, and rocmft never guesses one" in only_error(exc)


def test_a_full_fine_tune_is_its_output_dir(runs_dir):
    run = make_run(runs_dir, "r", finetuning_type="full", adapter=False)
    (run / "output" / "config.json").write_text("{}")
    t = load(run)
    assert (t.model, t.adapter, t.source) == (f"{runs_dir}/r/output", None, "full")
