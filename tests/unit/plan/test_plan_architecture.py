"""What the planner reads a model to be (plan/architecture.py), held to transformers and LLaMA-Factory themselves:
each family built on the meta device (no memory, no download) from the config the planner read, its parameters
counted, LLaMA-Factory's find_all_linear_modules run on it, PEFT's LoRA put on it. Then what the plan does with
it: every expert in memory, the active ones in the FLOPs, local attention per layer type, hybrids refused."""

from __future__ import annotations

import json

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.plan import check, memory, models, throughput, zero3

TABLE = ("Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b", "mistralai/Mixtral-8x7B-v0.1", "google/gemma-3-12b-it",
         "google/gemma-3-1b-it", "mistralai/Mistral-Small-24B-Instruct-2501", "Qwen/Qwen3-8B")
# Small configs of the families the table has no entry for, each with what makes it differ: dense layers among
# MoE ones (mlp_only_layers, decoder_sparse_step), shared experts, llama4's interleaved MoE and chunked attention,
# a SigLIP tower with its pooling head.
TINY = {
    "qwen3_moe": dict(model_type="qwen3_moe", hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8,
                      num_experts_per_tok=2, mlp_only_layers=[1], vocab_size=500),
    "qwen2_moe": dict(model_type="qwen2_moe", hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                      shared_expert_intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, num_experts=8, num_experts_per_tok=2, decoder_sparse_step=2,
                      mlp_only_layers=[0], vocab_size=500),
    "llama4_text": dict(model_type="llama4_text", hidden_size=64, intermediate_size=48, intermediate_size_mlp=96,
                        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2, vocab_size=500,
                        attention_chunk_size=32),
    "gpt_oss": dict(model_type="gpt_oss", hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                    num_experts_per_tok=2, vocab_size=500),
    "gemma3": dict(model_type="gemma3", text_config=dict(model_type="gemma3_text", hidden_size=64, intermediate_size=96,
                                                         num_hidden_layers=6, num_attention_heads=4,
                                                         num_key_value_heads=2, head_dim=16, vocab_size=500,
                                                         sliding_window=16),
                   vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=2, image_size=56, patch_size=14),
                   mm_tokens_per_image=4),
}


def _config(name: str) -> dict:
    if name in TINY:
        return TINY[name]
    entry = models._table(str(models.TABLE_FILE))[name.lower()]
    return {k: v for k, v in entry.items() if k not in ("source", "aliases", "_name")}


def _meta_model(cfg: dict):
    import torch
    import transformers

    config = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        if cfg["model_type"] == "gemma3":
            return transformers.Gemma3ForConditionalGeneration(config)
        return transformers.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("name", [*TABLE, *TINY])
def test_parameters_and_lora_targets_are_transformers_and_llamafactorys(name):
    from llamafactory.model.model_utils.misc import find_all_linear_modules

    cfg = _config(name)
    spec = models.from_config(name, cfg, "test")
    model = _meta_model(cfg)
    assert spec.total_params == sum(p.numel() for p in model.parameters())
    # LLaMA-Factory's `lora_target: all` (freeze_vision_tower: its default): no routed expert, no vision module
    assert set(spec.linear_names) == set(find_all_linear_modules(model, freeze_vision_tower=True))


@pytest.mark.parametrize("name", list(TINY))
def test_lora_parameters_are_pefts(name):
    """PEFT's own count of what a LoRA on `all` trains (the adapters on every linear it finds, shared experts and
    dense layers included, routed experts not)."""
    from llamafactory.model.model_utils.misc import find_all_linear_modules
    from peft import LoraConfig, get_peft_model

    cfg = _config(name)
    spec = models.from_config(name, cfg, "test")
    model = _meta_model(cfg)
    targets = find_all_linear_modules(model, freeze_vision_tower=True)
    if cfg["model_type"] == "gemma3":  # LLaMA-Factory names the language model's modules (visual.py patch_target_modules)
        from llamafactory.hparams import FinetuningArguments
        from llamafactory.model.model_utils.visual import patch_target_modules

        targets = patch_target_modules(model, FinetuningArguments(), targets)
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=targets))
    trained = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert spec.lora_params(spec.linear_names, 4) == trained


def test_layer_types_are_the_configuration_classes():
    import transformers

    for name in ("gpt_oss", "llama4_text", "gemma3"):
        cfg = _config(name)
        config = transformers.AutoConfig.for_model(**cfg)
        text = config.get_text_config()
        spec = models.from_config(name, cfg, "test")
        assert list(spec.layer_types) == list(text.layer_types), name
    assert models.from_table("google/gemma-3-12b-it").layer_types.count("full_attention") == 8  # 5 sliding : 1 full


def test_published_totals_and_active_counts():
    """Each model card's own figures: Qwen3-30B-A3B "30.5B total, 3.3B activated" (huggingface.co/Qwen/Qwen3-30B-A3B),
    gpt-oss-20b 20.91B total, 3.61B active without the input embeddings (OpenAI's gpt-oss model card, table 1),
    Mixtral 8x7B 46.7B total, 12.9B per token (mistral.ai/news/mixtral-of-experts)."""
    qwen = models.from_table("Qwen/Qwen3-30B-A3B")
    assert (round(qwen.total_params / 1e9, 1), round(qwen.active_params / 1e9, 1)) == (30.5, 3.4)
    gpt = models.from_table("openai/gpt-oss-20b")
    assert round(gpt.total_params / 1e9, 2) == 20.91
    assert round((gpt.active_params - gpt.embed_params) / 1e9, 2) == 3.61
    mixtral = models.from_table("mistralai/Mixtral-8x7B-v0.1")
    assert (round(mixtral.total_params / 1e9, 1), round(mixtral.active_params / 1e9, 1)) == (46.7, 12.9)
    assert qwen.params_text() == "30.53 B total, 3.35 B active"


def test_memory_holds_every_expert_and_flops_count_the_active_ones(recipe_factory):
    result = check(recipe_factory(model_name_or_path="Qwen/Qwen3-30B-A3B", cutoff_len=2048), strict=True)
    m = result.workload.model
    # bf16 frozen weights: all 30.5 B (every expert), not the 3.3 B a token uses
    assert result.memory.gib("weights") == pytest.approx(m.total_params * 2 / 2**30)
    forward = dict(result.throughput.flops_parts)["forward 2N + 4Lds"]
    attention = m.num_hidden_layers * 4.0 * m.q_dim * throughput.counted_span(result.workload)
    # 2N with N = attention + router + 8 of 128 experts per layer + lm_head: 3.04 B, not 30.5 B
    assert forward - attention == pytest.approx(2 * m.matmul_params)
    assert 3.0e9 < m.matmul_params < 3.1e9
    assert "30.53 B total, 3.35 B active" in result.report() and "30.53 B total, 3.35 B active" in result.summary


def test_lora_on_a_moe_adapts_attention_only_and_says_so_for_an_expert_target(recipe_factory):
    result = check(recipe_factory(model_name_or_path="Qwen/Qwen3-30B-A3B", lora_target="q_proj,gate_proj"), strict=True)
    assert result.workload.lora_targets == ("q_proj",)
    (warning,) = [p for p in result.problems if p.key == "llamafactory.lora_target"]
    assert "`gate_proj` is no nn.Linear" in warning.message and "3D parameters" in warning.message
    every = check(recipe_factory(model_name_or_path="Qwen/Qwen3-30B-A3B", lora_target="all"), strict=True)
    assert every.workload.lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj")


def test_zero3_gathers_a_moe_block_whole(recipe_factory):
    """Qwen3-235B-A22B's MoE block (128 experts of 4096 x 1536 x 3) is 2.4 B parameters: LLaMA-Factory makes it a
    ZeRO-3 leaf, so it is gathered at once, above stage3_max_live_parameters (1e9)."""
    result = check(recipe_factory(model_name_or_path="Qwen/Qwen3-235B-A22B", gpus=8, deepspeed="zero3"), strict=True)
    block = result.workload.model.experts.block_params
    assert block > 2e9
    assert result.memory.gib("buffers") >= block * 2 / 2**30


def test_sliding_layers_are_costed_by_their_window(recipe_factory):
    """Gemma 3: 40 of 48 layers attend to 1,024 tokens. With flash-attn (a causal kernel that honours the window)
    they count a span of 2,048 in PaLM's count; with SDPA transformers passes a sliding-window mask, which scores
    every pair: the time factor says so."""
    fa2 = check(recipe_factory(model_name_or_path="google/gemma-3-12b-it", cutoff_len=8192, flash_attn="fa2",
                               neat_packing=True), strict=True)
    spans = throughput.layer_spans(fa2.workload)
    assert sorted(set(spans)) == [2048, 8192] and spans.count(2048) == 40
    sdpa = check(recipe_factory(model_name_or_path="google/gemma-3-12b-it", cutoff_len=8192, flash_attn="sdpa",
                                packing=True), strict=True)
    skips, why = throughput.attention_kernel(sdpa.workload)
    assert not skips and "40 local-attention layers" in why
    flops = throughput.flops_per_token(sdpa.workload)[0]
    assert throughput.attention_factor(sdpa.workload, flops) < 0.9
    dense_like = check(recipe_factory(model_name_or_path="google/gemma-3-12b-it", cutoff_len=1024, flash_attn="fa2"),
                       strict=True)
    assert set(throughput.layer_spans(dense_like.workload)) == {1024}  # a window wider than the span changes nothing


def test_the_vision_tower_is_counted_as_frozen_weights(recipe_factory):
    result = check(recipe_factory(model_name_or_path="google/gemma-3-12b-it"), strict=True)
    m = result.workload.model
    assert m.vision_params == 421_290_864  # SigLIP-So400m at 896 px + the projector (the meta model's count above)
    assert memory.param_counts(result.workload).frozen_other >= m.vision_params
    assert "vision tower + projector" in result.report()


def test_gpt_oss_is_planned_with_eager_attention(recipe_factory):
    result = check(recipe_factory(model_name_or_path="openai/gpt-oss-20b", flash_attn="fa2"), strict=True)
    assert result.workload.attention == "disabled"
    assert any("eager attention (its sinks)" in p.message for p in result.problems)


@pytest.mark.parametrize("config,kind", [
    (dict(model_type="qwen3_next", hidden_size=2048, intermediate_size=5120, num_hidden_layers=48, num_attention_heads=16,
          num_key_value_heads=2, vocab_size=151936, num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512),
     "36 linear_attention, 12 full_attention layers"),
    (dict(model_type="qwen3_5", text_config=dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                                                 num_attention_heads=16, num_key_value_heads=4, vocab_size=248320)),
     "24 linear_attention, 8 full_attention layers"),
])
def test_a_hybrid_linear_attention_model_is_refused_in_one_line_naming_its_layers(tmp_path, config, kind):
    folder = tmp_path / "hybrid"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ProblemReport) as raised:
        models.resolve(str(folder))
    (problem,) = raised.value.problems
    assert kind in problem.message and "will not cost linear_attention layers as full attention" in problem.message


def test_the_layer_types_a_config_states_are_read(tmp_path):
    cfg = dict(_config("gpt_oss"), layer_types=["full_attention", "linear_attention"])
    with pytest.raises(ProblemReport, match="1 linear_attention, 1 full_attention"):
        models.from_config("x", cfg, "test")


def test_multi_head_latent_attention_is_refused():
    with pytest.raises(ProblemReport, match="multi-head latent attention"):
        models.from_config("deepseek-ai/DeepSeek-V3", dict(model_type="deepseek_v3", hidden_size=7168,
                                                            intermediate_size=18432, num_hidden_layers=61,
                                                            num_attention_heads=128, vocab_size=129280,
                                                            n_routed_experts=256, kv_lora_rank=512), "test")


@pytest.mark.parametrize("typo,meant", [
    ("Qwen/Qwen3-30B-A3B-Instruct-2508", "Qwen/Qwen3-30B-A3B-Instruct-2507"),
    ("Qwen/Qwen3-32B-A3B", "Qwen/Qwen3-30B-A3B"),  # closer by spelling to the dense Qwen3-32B, but a MoE name
    ("Qwen/Qwen3-30B-A3C", "Qwen/Qwen3-30B-A3B"),  # a mistyped active-size suffix is still a MoE name
    ("Qwen/Qwen3-14B-Bse", "Qwen/Qwen3-14B-Base"),
    ("openai/gpt-oss-21b", "openai/gpt-oss-20b"),
])
def test_did_you_mean_stays_in_the_family_and_the_kind(recipe_factory, typo, meant):
    with pytest.raises(ProblemReport) as raised:
        check(recipe_factory(model_name_or_path=typo), strict=True)
    assert f"did you mean `{meant}`?" in str(raised.value)


def test_did_you_mean_never_crosses_from_moe_to_dense():
    assert models.name_kind("Qwen/Qwen3-30B-A3B") == ("qwen3", True)
    assert models.name_kind("Qwen/Qwen3-32B") == ("qwen3", False)
    # by spelling alone these are closest to the dense Qwen3-8B (io.problems.did_you_mean over the whole table)
    assert models.did_you_mean_same_kind("Qwen/Qwen3-8B-A1B") == "did you mean `Qwen/Qwen3-30B-A3B`?"
    assert models.did_you_mean_same_kind("Qwen/Qwen3-8B-MoE") == ""  # no MoE entry is close: no guess
    assert models.did_you_mean_same_kind("google/gemma-3-12b-instruct") == "did you mean `google/gemma-3-12b-it`?"
    assert models.did_you_mean_same_kind("acme/Qwen3ish-8B") == ""  # a family the name does not tell: no guess


def test_neat_packing_on_sliding_layers_without_flash_attn_is_a_warning(recipe_factory):
    """transformers 5.6 hands a 4D mask to every layer unchanged (masking_utils._preprocess_mask_arguments), so
    neat_packing on SDPA makes Gemma 3's sliding layers attend past their window (1B: 512 tokens)."""
    def warned(**lf):
        result = check(recipe_factory(model_name_or_path="google/gemma-3-1b-it", neat_packing=True, **lf), strict=True)
        return [p for p in result.problems if p.key == "llamafactory.neat_packing"]

    (warning,) = warned(cutoff_len=2048, flash_attn="sdpa")
    assert "22 sliding-window layers" in warning.message and "cutoff_len <= 512" in warning.suggestion
    assert warned(cutoff_len=512, flash_attn="sdpa") == []  # no sample outgrows the window
    assert warned(cutoff_len=2048, flash_attn="fa2") == []  # flash-attn's varlen path keeps the window


def test_neat_packing_on_a_multimodal_model_is_a_warning(recipe_factory):
    """LLaMA-Factory's collator appends a placeholder image to a text-only batch of a multimodal model, not to the
    packed row's position ids: the rehearsal of a Gemma 3 recipe with neat_packing stopped at its first step."""
    result = check(recipe_factory(model_name_or_path="google/gemma-3-12b-it", neat_packing=True, cutoff_len=1024),
                   strict=True)
    (warning,) = [p for p in result.problems if p.key == "llamafactory.neat_packing"]
    assert "is multimodal" in warning.message and warning.suggestion == "padded rows: neat_packing=false"
    text_only = check(recipe_factory(model_name_or_path="google/gemma-3-1b-it", neat_packing=True, cutoff_len=512),
                      strict=True)
    assert not [p for p in text_only.problems if p.key == "llamafactory.neat_packing"]


def test_every_table_names_kind_is_its_configs():
    """What a name says (models.name_kind: the only thing known of an unknown model) agrees with what every table
    entry's config is: its family (model_type) and whether it has experts."""
    for name in models.table_names():
        spec = models.from_table(name)
        family, moe = models.name_kind(name)
        assert moe == spec.is_moe, name
        assert family in ("", models._TYPE_FAMILY.get(spec.model_type, spec.model_type)), name


@pytest.mark.parametrize("layers", [2, -2])
def test_zero3_trains_what_llamafactorys_freeze_tuning_trains(layers, tmp_path, recipe_factory):
    """freeze_trainable_layers: 2 trains the last two layers, -2 the first two, freeze_extra_modules: lm_head the
    head too (LLaMA-Factory's own _setup_freeze_tuning, run on the model built from the config the planner read).
    On a MoE model whose first layer is dense, which layers train changes what trains: ZeRO-3's parameter listing
    (what it keeps whole and gathers, trainable or not) trains the real model's elements."""
    from llamafactory.hparams import FinetuningArguments
    from llamafactory.model.adapter import _setup_freeze_tuning

    cfg = {**TINY["qwen3_moe"], "mlp_only_layers": [0]}
    (tmp_path / "moe").mkdir()
    (tmp_path / "moe" / "config.json").write_text(json.dumps(cfg))
    asked = {"finetuning_type": "freeze", "freeze_trainable_layers": layers, "freeze_extra_modules": "lm_head"}
    w = check(recipe_factory(model_name_or_path=str(tmp_path / "moe"), gpus=2, deepspeed="zero3", **asked),
              strict=True).workload
    model = _meta_model(cfg)
    _setup_freeze_tuning(model, FinetuningArguments(**asked), is_trainable=True, cast_trainable_params_to_fp32=False)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert "lm_head.weight" in {n for n, p in model.named_parameters() if p.requires_grad}
    assert sum(n for n, trains in zero3.parameters(w) if trains) == trained
