"""The real-token model: row lengths from the dataset files, padding and packing arithmetic (issue 21)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rocmft.plan import batching, check, lengths, throughput
from rocmft.recipe import recipes

pytestmark = pytest.mark.real_tokens


def _lengths(*tokens: int) -> lengths.Lengths:
    return lengths.Lengths(("hand",), tuple(tokens), "by hand")


def test_padding_arithmetic_on_a_handmade_distribution():
    # Half the rows 100 tokens, half 300 (already multiples of 8 after rounding: 104, 304); micro-batch 2.
    hand = _lengths(*([100] * 50 + [300] * 50))
    b = batching.compute(hand, 2, 2048, "padded", "sdpa")
    # Longest of 2 draws: 104 only when both are short (1/4), else 304: E = 104/4 + 304 * 3/4 = 254.
    assert b.computed == pytest.approx(2 * 254)
    assert b.real == pytest.approx(2 * 200)
    assert b.padding == pytest.approx(1 - 400 / 508)
    assert b.attn_span == pytest.approx(254) and b.rows == 100 and b.truncated == 0
    # One row per micro-batch: padding only to the multiple of 8.
    assert batching.compute(hand, 1, 2048, "padded", "sdpa").padding == pytest.approx(1 - 200 / 204)


def test_truncation_at_cutoff_and_packing_fill():
    hand = _lengths(*([100] * 30 + [3000] * 2))
    padded = batching.compute(hand, 1, 1024, "padded", "sdpa")
    assert padded.truncated == 2 and padded.epoch_tokens == 30 * 100 + 2 * 1024
    # Packing: capacity 1023 (LLaMA-Factory shortens cutoff_len by one), the long rows truncated to it, each
    # a row of its own; the thirty 100-token rows fill three rows of ten.
    packed = batching.compute(hand, 1, 1024, "neat_packing", "sdpa")
    assert packed.rows == 5 and packed.epoch_tokens == 30 * 100 + 2 * 1023
    assert packed.computed == 1024 and packed.attn_span == 1024  # SDPA computes every position of the row
    assert packed.real == pytest.approx(packed.epoch_tokens / 5)
    fa2 = batching.compute(hand, 1, 1024, "neat_packing", "fa2")
    assert fa2.computed == fa2.real and fa2.padding == 0  # FA2: the collator cuts the padding off
    assert fa2.attn_span == pytest.approx((30 * 100 ** 2 + 2 * 1023 ** 2) / fa2.epoch_tokens)


def test_greedy_knapsack_is_llamafactorys():
    pytest.importorskip("torch")
    import random

    from llamafactory.data.processor.processor_utils import greedy_knapsack

    rng = random.Random(0)
    numbers = [rng.randint(1, 900) for _ in range(700)]
    assert batching.greedy_knapsack(list(numbers), 1023) == greedy_knapsack(list(numbers), 1023)


def test_lengths_by_the_recipes_tokenizer_match_llamafactorys_template(tiny_model):
    pytest.importorskip("torch")
    from rocmft.data.formats import TURNS
    from rocmft.data.tokens import TokenCounter

    recipe = recipes.load("tiny-cpu")
    found = lengths.read(recipe.llamafactory)
    assert "the recipe's tokenizer (models/tiny-llama)" in found.how
    counter = TokenCounter(str(tiny_model), "llama3")
    exact = []
    for name, fmt in (("demo_alpaca", "alpaca"), ("demo_messages", "messages")):
        for line in (recipes.paths.root() / "data" / f"{name}.jsonl").read_text().splitlines():
            exact.append(counter.count(*TURNS[fmt](json.loads(line))))
    assert len(found.tokens) == len(exact)
    assert max(abs(a - b) for a, b in zip(found.tokens, exact)) <= 2  # the template's markup, estimated per message


def test_without_a_tokenizer_characters_are_counted_and_said(tmp_path):
    rows = [{"instruction": "x" * 400, "input": "", "output": "y" * 400}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "d.jsonl"}}))
    found = lengths.read({"dataset": "d", "dataset_dir": str(tmp_path), "model_name_or_path": "org/absent",
                          "template": "llama3"})
    assert found.how.startswith("~4 characters per token")
    assert found.tokens == (200 + 1 + 2 * lengths.MARKUP_PER_MESSAGE,)  # 800 chars, bos, two messages' markup


def test_hub_datasets_fall_back_to_the_cutoff_bound_and_say_so(tmp_path):
    (tmp_path / "dataset_info.json").write_text(json.dumps({"h": {"hf_hub_url": "org/data"}}))
    recipe = recipes.load("llama3-8b-z3", [f"dataset_dir={tmp_path}", "dataset=h"])
    result = check(recipe)
    assert result.workload.lengths is None and throughput.batches(result.workload) is None
    assert "hub dataset" in result.lengths_note and "upper bound" in result.lengths_note


def test_packing_is_suggested_with_its_gain_and_set(tmp_path):
    result = check(recipes.load("llama3-8b-z3", ["neat_packing=false", "per_device_train_batch_size=4",
                                                 "cutoff_len=2048", "gradient_accumulation_steps=4"]))
    packing = [s for s in result.suggestions if "neat_packing=true" in s.overrides]
    assert packing, [s.line() for s in result.suggestions]
    first = packing[0]
    assert {"per_device_train_batch_size=1", "cutoff_len=8192"} <= set(first.overrides)  # FA2: micro-batch 1
    assert first.speed > 2  # demo rows of ~40 tokens: padded micro-batches are mostly gathers and padding
    # on SDPA (RDNA) the micro-batch stays
    rdna = check(recipes.load("qwen2.5-7b-lora-7900xtx", ["neat_packing=false", "per_device_train_batch_size=2",
                                                          "gradient_accumulation_steps=8"]))
    w = rdna.workload
    packed = throughput.batches(replace(w, packing="neat_packing"))
    assert packed.computed == 2 * 1024 and throughput.batches(w).computed < 2 * 1024


def test_real_tokens_per_second_carry_the_padding_and_the_real_micro_batch():
    padded = check(recipes.load("llama3-8b-z3", ["neat_packing=false", "per_device_train_batch_size=4",
                                                 "cutoff_len=2048", "gradient_accumulation_steps=4"])).workload
    b = throughput.batches(padded)
    factors = dict(throughput.speed_factors(padded))
    pad = [f for name, f in factors.items() if name.startswith("padding")]
    assert pad == [pytest.approx(b.real_fraction)]
    zero3 = [name for name in factors if name.startswith("ZeRO-3")]
    assert zero3 and f"of {b.computed:.0f} tokens" in zero3[0]  # the gathers are paid per real micro-batch


def test_an_explicit_attention_mask_pays_the_causal_half_a_causal_kernel_skips(recipe_factory):
    # Ten 100-token rows at cutoff 1024: one packed row of 1,000 real tokens + 24 of padding, micro-batch 1.
    hand = _lengths(*([100] * 10))
    base = check(recipe_factory(arch="gfx1100", disable_gradient_checkpointing=True), strict=True).workload
    packing = replace(base, lengths=hand, packing="packing", attention="sdpa")
    neat = replace(packing, packing="neat_packing")
    # packing: an all-ones 2D mask, so transformers passes is_causal=True and no mask; neat_packing: the 4D mask
    assert throughput.attention_kernel(packing)[0] and not throughput.attention_kernel(neat)[0]
    m = base.model
    L, d = m.num_hidden_layers, m.q_dim
    attention = (L + 2 * L) * 4 * d * 1024  # forward + LoRA backward (input gradients), the packed row's span
    assert throughput.attention_flops(neat) == pytest.approx(attention)
    total = throughput.flops_per_token(neat)[0]
    assert total == throughput.flops_per_token(packing)[0]  # the same model FLOPs: the difference is the kernel's
    expected = (total - attention / 2) / total  # a causal kernel computes half of the counted attention
    assert dict(throughput.speed_factors(neat))[
        "attention: SDPA with neat_packing's 4D mask scores every pair (a causal kernel skips half)"] == pytest.approx(expected)
    assert throughput.relative_speed(neat, packing) == pytest.approx(expected)  # same padding, same factors else
    assert 0.96 < expected < 0.98  # Llama-2-7B at 1,024 tokens: attention is ~6% of the counted FLOPs
    # Gradient checkpointing recomputes the attention too: the mask costs that pass as well.
    gc = replace(neat, gradient_checkpointing=True)
    assert throughput.attention_flops(gc) == pytest.approx(attention * 4 / 3)
    # flash-attn (varlen, causal) never pays it; eager always does; a padded SDPA micro-batch does when it pads.
    assert throughput.attention_kernel(replace(neat, attention="fa2"))[0]
    assert not throughput.attention_kernel(replace(packing, attention="disabled"))[0]
    padded = replace(packing, packing="padded", micro_batch=2)
    assert not throughput.attention_kernel(replace(padded, lengths=_lengths(100, 300)))[0]
    assert throughput.attention_kernel(replace(padded, lengths=_lengths(104, 104)))[0]  # nothing to mask
