"""The model table, local config.json dirs and the bad-input messages for an unknown model."""

from __future__ import annotations

import json

import pytest

from rocmft.io import paths
from rocmft.io.problems import ProblemReport
from rocmft.plan import check, models

# Parameter counts the model cards publish (safetensors metadata on each model's Hugging Face page).
PUBLISHED = {
    "meta-llama/Meta-Llama-3-8B": 8_030_261_248,
    "meta-llama/Llama-3.1-70B": 70_553_706_496,
    "meta-llama/Llama-2-7b-hf": 6_738_415_616,
    "Qwen/Qwen2.5-7B-Instruct": 7_615_616_512,
    "Qwen/Qwen2.5-72B-Instruct": 72_706_203_648,
    "Qwen/Qwen3-8B": 8_190_735_360,
    "Qwen/Qwen2.5-0.5B": 494_032_768,
}


@pytest.mark.parametrize("name,params", PUBLISHED.items())
def test_table_parameter_counts_match_the_published_ones(name, params):
    assert models.from_table(name).total_params == params


def test_every_table_entry_has_a_source_and_the_keys():
    for name in models.table_names():
        spec = models.from_table(name)
        assert spec.source.startswith("models table") and "https://huggingface.co/" in spec.source


def test_aliases_and_mirrors_resolve():
    assert models.from_table("meta-llama/Meta-Llama-3-8B-Instruct").hidden_size == 4096
    # a ModelScope mirror id: same last component as a table entry
    assert models.from_table("LLM-Research/Meta-Llama-3-8B-Instruct").vocab_size == 128256
    assert models.from_table("someone/Qwen2.5-14B-Instruct").num_hidden_layers == 48
    assert models.from_table("nobody/NoSuchModel") is None


def test_local_dir_config_takes_precedence(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": False}))
    spec = models.resolve(str(folder))
    assert (spec.hidden_size, spec.num_key_value_heads, spec.head_dim) == (64, 2, 16)
    assert spec.source == str(folder / "config.json")


def test_hub_cache_config_is_read(tmp_path, monkeypatch):
    snap = tmp_path / "cache" / "models--acme--Tiny-1B" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({
        "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
        "vocab_size": 500}))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert models.resolve("acme/Tiny-1B").num_hidden_layers == 3


def test_tiny_llama_dir_is_read_relative_to_the_root(tiny_model):
    assert tiny_model == paths.root() / "models" / "tiny-llama"  # built by the fixture when missing
    spec = models.resolve("models/tiny-llama")
    assert (spec.hidden_size, spec.num_hidden_layers, spec.num_attention_heads, spec.num_key_value_heads,
            spec.intermediate_size) == (64, 2, 4, 2, 128)


def test_inline_plan_model_block(recipe_factory):
    arch = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
            "num_attention_heads": 32, "vocab_size": 32000}
    result = check(recipe_factory(model_name_or_path="private/llama-like", plan={"model": arch}), strict=True)
    assert result.workload.model.total_params == 6_738_415_616
    assert result.workload.model.source == "recipe plan.model"


def test_unknown_model_says_which_keys_and_how_to_add_it(recipe_factory):
    with pytest.raises(ProblemReport) as exc:
        check(recipe_factory(model_name_or_path="acme/Unknown-13B"), strict=True)
    text = str(exc.value)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                "num_key_value_heads", "plan: model:", "src/rocmft/plan/models.yaml", "config.json"):
        assert key in text
    assert "llamafactory.model_name_or_path" in text


def test_unknown_model_does_not_block_a_run(recipe_factory):
    result = check(recipe_factory(model_name_or_path="acme/Unknown-13B"))
    assert result.fits and result.verdict == "unknown" and result.memory is None
    assert "cannot plan" in result.summary and "hidden_size" in result.summary


def test_close_name_gets_a_did_you_mean(recipe_factory):
    with pytest.raises(ProblemReport) as exc:
        check(recipe_factory(model_name_or_path="Qwen/Qwen2.5-7B-Instrct"), strict=True)
    assert "did you mean `Qwen/Qwen2.5-7B-Instruct`" in str(exc.value)


def test_local_dir_without_config_or_with_missing_keys(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(ProblemReport, match="has no config.json"):
        models.resolve(str(folder))
    (folder / "config.json").write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2}))
    with pytest.raises(ProblemReport, match="lacks intermediate_size, num_attention_heads, vocab_size"):
        models.resolve(str(folder))


def test_a_mixture_of_experts_config_is_planned_not_refused(tmp_path):
    """It was refused ("the planner models dense decoder-only models only"); test_plan_architecture.py holds the
    counts to transformers' own."""
    folder = tmp_path / "moe"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "num_experts": 8, "num_experts_per_tok": 2}))
    spec = models.resolve(str(folder))
    assert spec.experts.count == 8 and spec.active_params < spec.total_params


def test_multimodal_text_config_is_used(tmp_path):
    folder = tmp_path / "vl"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "x_vl", "text_config": {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100}}))
    assert models.resolve(str(folder)).hidden_size == 64


def test_an_unbuilt_tiny_model_says_how_to_build_it(tmp_path, monkeypatch):
    for folder in ("recipes", "ds_configs"):
        (tmp_path / folder).mkdir()
    monkeypatch.setenv("ROCMFT_ROOT", str(tmp_path))  # a fresh clone: no models/
    with pytest.raises(ProblemReport) as raised:
        models.resolve("models/tiny-llama")
    (problem,) = raised.value.problems
    assert "the tiny model `models/tiny-llama` is not built yet" in problem.message
    assert "`make tiny-model`" in problem.suggestion
