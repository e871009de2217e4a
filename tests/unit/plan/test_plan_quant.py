"""The planner's quantised base weights, pinned by hand on single layers, then checked against published figures.

Hand-computed (no planner code in the expected values):
  Llama-3-8B q_proj, 4,096 x 4,096 = 16,777,216 weights, NF4 blocksize 64:
    codes  16,777,216 / 2                 = 8,388,608 bytes
    blocks 16,777,216 / 64                = 262,144 absmax values
    double quantisation: 262,144 x 1 byte + ceil(262,144 / 256) = 1,024 fp32 second-level absmax (4,096 bytes)
                         + 1 fp32 offset (4 bytes)          -> 8,388,608 + 262,144 + 4,096 + 4 = 8,654,852
    plain: 262,144 fp32 absmax = 1,048,576 bytes            -> 9,437,184
    = 4.127 and 4.5 bits per weight: the QLoRA paper's 0.127 and 0.5 bits of constants (sec. 3).
  gate_proj 4,096 x 14,336 = 58,720,256 weights: 29,360,128 + 917,504 + 3,584 x 4 + 4 = 30,291,972 bytes.
  LLM.int8 q_proj: 16,777,216 int8 + 4,096 fp32 row scales = 16,793,600 bytes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rocmft.plan import check, memory, quant, suggest, throughput
from tests.unit.plan.conftest import make_recipe

GIB = 2**30
GB = 1e9


def test_nf4_bytes_of_a_hand_computed_layer():
    assert quant.nf4_bytes(4096 * 4096, double_quant=True) == 8_654_852
    assert quant.nf4_bytes(4096 * 4096, double_quant=False) == 9_437_184
    assert quant.nf4_bytes(4096 * 14336, double_quant=True) == 30_291_972
    assert quant.int8_bytes(4096, 4096) == 16_793_600
    # bits per weight, the QLoRA paper's (sec. 3): 4 + 0.127 with double quantisation, 4 + 0.5 without
    n = 4096 * 4096
    assert 8 * quant.nf4_bytes(n, double_quant=True) / n == pytest.approx(4 + 0.127, abs=5e-4)
    assert 8 * quant.nf4_bytes(n, double_quant=False) / n == pytest.approx(4.5)


def test_llama3_8b_weights_component_is_the_sum_of_its_tensors():
    plan = check(make_recipe(model_name_or_path="meta-llama/Meta-Llama-3-8B", quantization_bit=4, lora_rank=16),
                 strict=True).memory
    # per layer: q, o 4096x4096; k, v 4096x1024 (8 kv heads x 128); gate, up, down 4096x14336
    kv = 4096 * 1024
    layer = (2 * 8_654_852 + 2 * (kv // 2 + kv // 64 + 4 * -(-(kv // 64) // 256) + 4) + 3 * 30_291_972)
    embeddings = 2 * 128256 * 4096 * 2  # embed_tokens and lm_head (untied), bf16
    norms = (2 * 4096 * 32 + 4096) * 2
    assert plan.gib("weights") == pytest.approx((32 * layer + embeddings + norms) / GIB, rel=1e-9)
    assert plan.gib("dequant") == pytest.approx(4096 * 14336 * 2 / GIB)  # gate_proj in bf16, once
    no_dq = check(make_recipe(model_name_or_path="meta-llama/Meta-Llama-3-8B", quantization_bit=4, lora_rank=16,
                              double_quantization=False), strict=True).memory
    assert no_dq.gib("weights") - plan.gib("weights") == pytest.approx(
        32 * (2 * (1_048_576 - 262_144 - 4_100) + 2 * (kv // 16 - kv // 64 - 4 * 256 - 4) + 3 * (3_670_016 - 917_504 - 14_340))
        / GIB, rel=1e-9)


def test_lora_states_and_activations_are_the_bf16_runs():
    """Quantisation changes the frozen weights and adds the dequantised layer; the adapter's weights, gradients,
    optimizer states and the activations are those of the same LoRA on bf16 weights."""
    bf16 = check(make_recipe(model_name_or_path="meta-llama/Meta-Llama-3-8B", lora_rank=16), strict=True).memory
    q4 = check(make_recipe(model_name_or_path="meta-llama/Meta-Llama-3-8B", lora_rank=16, quantization_bit=4),
               strict=True).memory
    for key in ("trainable", "gradients", "optimizer", "autocast", "activations", "logits", "step"):
        assert q4.gib(key) == pytest.approx(bf16.gib(key)), key
    assert bf16.gib("dequant") == 0 and q4.gib("weights") < 0.4 * bf16.gib("weights")  # the bf16 embeddings and lm_head stay


@pytest.mark.parametrize("setup,figure,low,high,source", [
    # LLaMA-Factory's wiki "Performance comparison": LLaMA2-7B, A100 40GB, batch 4 x 1024 tokens, LoRA r8 on all
    # linears, HF + bitsandbytes: 18GB in 16 bits, 9GB in 4 bits (nvidia-smi, so the runtime's reserve included).
    ({"lora_rank": 8, "lora_target": "all", "lora_dropout": 0.0, "per_device_train_batch_size": 4},
     18, 0.9, 1.2, "LLaMA-Factory wiki, 16-bit"),
    ({"lora_rank": 8, "lora_target": "all", "lora_dropout": 0.0, "per_device_train_batch_size": 4,
      "quantization_bit": 4}, 9, 0.9, 1.2, "LLaMA-Factory wiki, 4-bit"),
    # Unsloth's requirements page: 70B QLoRA, 41 GB "absolute minimum" (Unsloth's own kernels and offloaded
    # checkpoints keep activations far below LLaMA-Factory's; the 4-bit weights of a Llama-3 70B dominate).
    ({"model_name_or_path": "meta-llama/Meta-Llama-3-70B", "lora_rank": 16, "lora_dropout": 0.0, "cutoff_len": 512,
      "quantization_bit": 4}, 41, 1.0, 1.25, "Unsloth requirements, 70B QLoRA"),
])
def test_published_memory(setup, figure, low, high, source):
    """https://github.com/hiyouga/LLaMA-Factory/wiki/Performance-comparison and
    https://unsloth.ai/docs/get-started/fine-tuning-for-beginners/unsloth-requirements (GB = 1e9 bytes)."""
    total = check(make_recipe(**setup), strict=True).memory.total_gib * GIB / GB
    assert figure * low <= total <= figure * high, f"{source}: planned {total:.1f} GB against {figure} GB"


def test_dequantisation_costs_little_at_4k_tokens_and_more_at_short_micro_batches():
    """LLaMA-Factory's wiki measured 4 bits at 101% of 16 bits' tokens/s (2,415 vs 2,392; batch 4 x 1024 on an
    A100): the planned cost at that micro-batch is a few percent, and grows as micro-batches shrink."""
    w = check(make_recipe(per_device_train_batch_size=4, lora_rank=8, lora_dropout=0.0), strict=True).workload
    at_4k = throughput.gpu_relative_speed(replace(w, quant_bits=4), w)
    assert 0.93 <= at_4k < 1.0
    short = replace(w, micro_batch=1, cutoff_len=256)
    assert throughput.gpu_relative_speed(replace(short, quant_bits=4), short) < at_4k
    # by hand: 3 dequantisations (forward, input gradient, recompute) x 2.6 bytes / 0.5 efficiency per weight,
    # against the step's FLOPs per token per weight x tokens / (247 FLOP/byte x mean MFU)
    q = replace(w, quant_bits=4)
    flops = throughput.flops_per_token(q)[0] + throughput.recompute_flops(q)
    per_weight = flops / (q.model.num_hidden_layers * q.model.layer_linear_params)
    over = 3 * 2.6 / 0.5 / (per_weight * 4096 / (247 * sum(q.mfu) / 2))
    assert throughput.quant_factor(q, flops)[1] == pytest.approx(1 / (1 + over))


@pytest.mark.parametrize("family, tflops, tbps, card", [
    # dense 16-bit peak TFLOP/s and memory TB/s from AMD's datasheets, typed here independently of quant.py's table
    ("cdna3", 1307.4, 5.3, "MI300X"),
    ("cdna4", 2516.6, 8.0, "MI355X"),
    ("cdna2", 191.5, 1.6, "MI250X, one GCD"),
    ("rdna3", 122.8, 0.96, "RX 7900 XTX (the QLoRA recipe's card)"),
    ("rdna4", 194.6, 0.64, "RX 9070 XT"),
    ("rdna2", 46.1, 0.512, "RX 6900 XT"),
])
def test_dequantisation_cost_follows_each_familys_flops_per_byte(family, tflops, tbps, card):
    """The dequantisation cost is bandwidth against FLOPs: a card with more FLOPs per byte pays more for the same
    micro-batch. Each family's planned cost, by hand from its card's datasheet (same formula as above)."""
    w = check(make_recipe(per_device_train_batch_size=4, lora_rank=8, lora_dropout=0.0), strict=True).workload
    q = replace(w, quant_bits=4, arch_family=family)
    flops = throughput.flops_per_token(q)[0] + throughput.recompute_flops(q)
    per_weight = flops / (q.model.num_hidden_layers * q.model.layer_linear_params)
    passes = 2 + (1 if q.gradient_checkpointing else 0)
    by_hand = passes * 2.6 / 0.5 / (per_weight * 4096 / (tflops / tbps * sum(q.mfu) / 2))
    planned = 1 / throughput.quant_factor(q, flops)[1] - 1
    assert planned == pytest.approx(by_hand, rel=0.01), card


def test_qlora_is_suggested_with_its_set_and_cost_when_bf16_lora_does_not_fit():
    r = check(make_recipe(arch="gfx1100", model_name_or_path="Qwen/Qwen2.5-14B", lora_rank=16, cutoff_len=1024),
              strict=True)
    assert r.verdict == "does not fit"
    [qlora, *_] = [s for s in r.suggestions if "quantization_bit=4" in s.overrides]
    assert {"quantization_bit=4", "quantization_type=nf4", "double_quantization=true"} <= set(qlora.overrides)
    assert any("dequantisation" in c for c in qlora.costs) and qlora.verdict in ("fits", "tight")


def test_qlora_is_never_suggested_where_llamafactory_or_the_image_refuses_it():
    w = check(make_recipe(arch="gfx1100", model_name_or_path="Qwen/Qwen2.5-14B", finetuning_type="full",
                          cutoff_len=1024), strict=True).workload
    plan = memory.estimate(w)
    found, _ = suggest.search(w, plan)
    # full fine-tuning + 4 bits is refused ("Quantization is only compatible with the LoRA or OFT method."):
    # QLoRA appears only together with the switch to LoRA
    assert all("finetuning_type=lora" in s.overrides for s in found if "quantization_bit=4" in s.overrides)
    old = check(make_recipe(arch="gfx1030", precision="fp32", model_name_or_path="Qwen/Qwen2.5-14B", cutoff_len=1024),
                strict=True)
    assert not any("quantization_bit=4" in s.overrides for s in old.suggestions)  # no bitsandbytes in that image


def test_8bit_under_zero3_is_refused_by_the_planner_in_llamafactorys_words():
    from rocmft.io.problems import ProblemReport

    with pytest.raises(ProblemReport) as exc:
        check(make_recipe(gpus=8, deepspeed="zero3", quantization_bit=8), strict=True)
    assert "Only 4-bit quantized model can use fsdp+qlora or auto device map." in str(exc.value)
    assert check(make_recipe(gpus=8, deepspeed="zero3", quantization_bit=4), strict=True).verdict == "fits"
