"""What each stage holds and runs: DPO's chosen and rejected sequences and its reference, KTO's KL and reference
forwards, a frozen reference copy only where the policy is not a LoRA adapter and the loss needs one; pairs
counted as two sequences; the shipped preference and pretraining recipes fit."""

from __future__ import annotations

import json

import pytest

from rocmft.plan import activations, check, lengths, throughput
from rocmft.recipe import recipes

GIB = 2 ** 30


def plan(recipe_factory, **lf):
    return check(recipe_factory(**lf), strict=True)


def test_lora_dpo_holds_two_sequences_per_pair_and_the_reference_forward_s_logits(recipe_factory):
    sft = plan(recipe_factory, per_device_train_batch_size=2)
    dpo = plan(recipe_factory, per_device_train_batch_size=2, stage="dpo", pref_loss="sigmoid")
    w = dpo.workload
    assert (w.sequences_per_sample, w.reference, w.extra_forwards) == (2, "adapter off", 1)
    assert dpo.memory.gib("activations") == pytest.approx(2 * sft.memory.gib("activations"), rel=0.01)
    assert dpo.memory.gib("logits") == pytest.approx(2 * sft.memory.gib("logits"))
    # 2 pairs x 2 sequences x 1024 tokens x 32,000 entries x (10 + 10 - 12) bytes
    assert dpo.memory.gib("reference_logits") == pytest.approx(4 * 1024 * 32000 * 8 / GIB)
    assert dpo.memory.gib("reference") == 0  # LoRA: the same weights with the adapter off
    assert dpo.memory.gib("weights") == sft.memory.gib("weights")
    assert dpo.verdict == "fits" and dpo.memory.total_gib > sft.memory.total_gib + 1.5
    fwd = dpo.throughput.flops_parts[0][1]
    assert dpo.throughput.flops_per_token == pytest.approx(sft.throughput.flops_per_token + fwd)


@pytest.mark.parametrize("loss", ["orpo", "simpo"])
def test_reference_free_losses_hold_no_reference_and_run_no_extra_forward(recipe_factory, loss):
    result = plan(recipe_factory, stage="dpo", pref_loss=loss, finetuning_type="full")
    w = result.workload
    assert (w.reference, w.extra_forwards) == ("none", 0)
    assert result.memory.gib("reference") == 0 and result.memory.gib("reference_logits") == 0


def test_full_dpo_loads_a_frozen_copy_sharded_under_zero3_whole_otherwise(recipe_factory):
    n = 6_738_415_616  # Llama-2-7B
    sharded = check(recipe_factory(gpus=8, deepspeed="zero3", stage="dpo", finetuning_type="full"), strict=True)
    whole = check(recipe_factory(gpus=8, deepspeed="zero2", stage="dpo", finetuning_type="full"), strict=True)
    assert sharded.memory.gib("reference") == pytest.approx(n * 2 / 8 / GIB, rel=0.01)
    assert whole.memory.gib("reference") == pytest.approx(n * 2 / GIB, rel=0.01)
    explicit = plan(recipe_factory, stage="dpo", ref_model="models/sft-merged")  # a LoRA policy, a named reference
    assert explicit.workload.reference == "copy" and explicit.memory.gib("reference") > 12


def test_kto_trains_one_sequence_per_row_and_runs_three_forwards_without_gradients(recipe_factory):
    sft = plan(recipe_factory)
    kto = plan(recipe_factory, stage="kto")
    w = kto.workload
    assert (w.sequences_per_sample, w.reference, w.extra_forwards) == (1, "adapter off", 3)
    assert kto.memory.gib("activations") == pytest.approx(sft.memory.gib("activations"))
    assert kto.memory.gib("reference_logits") > 0
    fwd = kto.throughput.flops_parts[0][1]
    assert kto.throughput.flops_per_token == pytest.approx(sft.throughput.flops_per_token + 3 * fwd)


def test_liger_does_not_chunk_the_logits_of_dpo_which_takes_them_whole(recipe_factory):
    kw = dict(model_name_or_path="meta-llama/Meta-Llama-3-8B-Instruct", enable_liger_kernel=True)
    sft = plan(recipe_factory, **kw)
    dpo = plan(recipe_factory, stage="dpo", **kw)
    assert activations.fused_loss(sft.workload) and not activations.fused_loss(dpo.workload)
    assert dpo.memory.gib("logits") > 20 * sft.memory.gib("logits")


def test_pairs_and_kto_rows_are_never_packed(recipe_factory):
    assert plan(recipe_factory, stage="dpo", packing=True).workload.packing == "padded"
    assert plan(recipe_factory, stage="kto", neat_packing=True).workload.packing == "padded"
    assert plan(recipe_factory, stage="pt").workload.packing == "packing"  # LLaMA-Factory's default for pt


@pytest.mark.real_tokens
def test_a_pair_is_two_sequences_counted_with_the_template(tiny_model):
    from rocmft.data import sft
    from rocmft.data.tokens import TokenCounter

    recipe = recipes.load("tiny-cpu-dpo")
    found = lengths.read(recipe.llamafactory)
    rows = [json.loads(x) for x in (recipes.paths.root() / "data" / "demo_dpo.jsonl").read_text().splitlines()]
    assert len(found.tokens) == 2 * len(rows)
    counter = TokenCounter(str(tiny_model), "llama3")
    exact = []
    for row in rows:
        system, prompt = sft.SHAREGPT.turns(row)
        exact += [counter.count(system, prompt + [("assistant", row[k]["value"])]) for k in ("chosen", "rejected")]
    assert max(abs(a - b) for a, b in zip(found.tokens, exact)) <= 2
    result = check(recipe, strict=True)
    b = throughput.batches(result.workload)
    assert b.rows == 2 * len(rows) and "78 pairs" in result.report()


@pytest.mark.real_tokens
def test_pretraining_documents_carry_no_chat_markup(tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps({"text": "x" * 400}) + "\n")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"t": {"file_name": "t.jsonl", "columns": {"prompt": "text"}}}))
    args = {"dataset": "t", "dataset_dir": str(tmp_path), "model_name_or_path": "org/absent", "template": "llama3"}
    assert lengths.read({**args, "stage": "pt"}).tokens == (100 + 1,)  # 400 characters and EOS
    assert lengths.read(args).tokens[0] > 101  # as an SFT prompt it would carry the template's markup


@pytest.mark.real_tokens
def test_pretraining_packs_full_blocks_and_a_text_under_one_block_trains_nothing(tmp_path, recipe_factory):
    """LLaMA-Factory concatenates the documents and cuts blocks of cutoff_len - 1, dropping the tail: no padding,
    and no row at all from a text shorter than one block (data/processor/pretrain.py)."""
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": "x" * 396}) + "\n" for _ in range(30)))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"t": {"file_name": "t.jsonl", "columns": {"prompt": "text"}}}))
    args = dict(stage="pt", packing=True, dataset="t", dataset_dir=str(tmp_path), per_device_train_batch_size=2)
    result = plan(recipe_factory, cutoff_len=1001, **args)  # 30 documents x (99 + EOS) = 3,000 tokens
    b = throughput.batches(result.workload)
    assert (b.rows, b.padding, b.epoch_tokens) == (3, 0.0, 3000)  # three full blocks of 1,000
    assert "padding 0%" in result.report()
    short = plan(recipe_factory, cutoff_len=4096, **args)
    assert throughput.batches(short.workload).rows == 0
    assert "less than one block of cutoff_len - 1 = 4,095" in short.report()


def test_a_dpo_epoch_counts_pairs(recipe_factory):
    dpo = plan(recipe_factory, stage="dpo", dataset="demo_dpo", per_device_train_batch_size=2,
               gradient_accumulation_steps=3)
    t = dpo.throughput.time
    assert t.steps == 13 and "78 rows" in t.what  # ceil(78 pairs / 2) // 3 = 13 steps per epoch
    assert t.tokens == 78 * 2 * 1024  # both sequences of every pair, at cutoff_len (lengths not read here)


@pytest.mark.parametrize("name", ["qwen2.5-7b-dpo-7900xtx", "llama3-8b-dpo-z3", "llama3-8b-pt-z3"])
def test_the_shipped_preference_and_pretraining_recipes_fit(name):
    result = check(recipes.load(name), strict=True)
    assert result.verdict == "fits", result.report()
    assert not [p for p in result.problems if "planned as sft" in p.message]


def test_the_7900xtx_dpo_recipe_is_at_the_card_s_limit_at_1024_tokens():
    """Why the recipe says 512: its two sequences' logits and the reference's take the rest of the 24 GiB."""
    result = check(recipes.load("qwen2.5-7b-dpo-7900xtx", ["cutoff_len=1024"]), strict=True)
    assert result.verdict in ("tight", "does not fit")
