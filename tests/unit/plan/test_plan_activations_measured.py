"""The CPU measurement behind the planner's per-layer activation bytes, run for real: one transformers
LlamaDecoderLayer (with PEFT LoRA where the case says), a forward pass under
torch.autograd.graph.saved_tensors_hooks, and the bytes of every distinct tensor autograd saved per token.
The figures must match the table in test_plan_calibration.py (which the planner is checked against)."""

from __future__ import annotations

import pytest

from tests.unit.plan.test_plan_calibration import LAYERS, SMALL

torch = pytest.importorskip("torch", reason="the measurement needs the CPU training stack (make setup)")
pytest.importorskip("peft", reason="the measurement needs the CPU training stack (make setup)")


class OneLayer(torch.nn.Module):
    """One decoder layer with its rotary embedding, fed a hidden state as the previous layer hands it on."""

    def __init__(self, layer, rope):
        super().__init__()
        self.layer, self.rope = layer, rope

    def forward(self, x):
        pos = torch.arange(x.shape[1])[None]
        out = self.layer(x, position_embeddings=self.rope(x, pos), attention_mask=None, position_ids=pos)
        return out[0] if isinstance(out, tuple) else out


def bf16_with_adapters(model, autocast: bool):
    """The model in bf16, its trainable (LoRA) parameters in fp32 when LLaMA-Factory upcasts them (autocast)."""
    model = model.to(torch.bfloat16)
    for p in model.parameters():
        if autocast and p.requires_grad:
            p.data = p.data.float()
    model.train()
    return model


def per_token(model, hidden: int, autocast: bool) -> float:
    """Bytes of every distinct tensor autograd saves in one forward, per token: the difference between two lengths
    leaves out what does not grow with tokens (weights, autocast's weight copies, RoPE tables)."""
    def saved(batch: int, seq: int) -> int:
        x = torch.randn(batch, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
        seen: dict[int, int] = {}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr != x.untyped_storage().data_ptr():  # the layer input is the previous layer's output
                seen[ptr] = max(seen.get(ptr, 0), t.untyped_storage().nbytes())
            return t

        linear = torch.nn.functional.linear
        if case.changes.get("deepspeed") == "zero3":  # what zero.Init does for the whole process (zero3.py)
            from deepspeed.runtime.zero.linear import zero3_linear_wrap

            torch.nn.functional.linear = zero3_linear_wrap
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                    torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                model(x)
        finally:
            torch.nn.functional.linear = linear
        return sum(seen.values())

    return (saved(2, 256) - saved(2, 128)) / (2 * 128)


def saved_bytes_per_token(case) -> float:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer,
        LlamaRotaryEmbedding,
    )

    cfg = LlamaConfig(**{k: v for k, v in SMALL.items() if k != "model_type"})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = OneLayer(LlamaDecoderLayer(cfg, 0), LlamaRotaryEmbedding(cfg))
    lora = case.changes.get("method") != "full"
    autocast = lora and not case.changes.get("pure_bf16")  # LLaMA-Factory's fp32 adapters under autocast
    if lora:
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=case.changes["lora_dropout"],
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                                 "gate_proj", "up_proj", "down_proj"]))
    return per_token(bf16_with_adapters(model, autocast), SMALL["hidden_size"], autocast)


@pytest.mark.parametrize("case", LAYERS, ids=[c.name for c in LAYERS])
def test_measured_saved_tensors_match_the_calibration_table(case):
    assert saved_bytes_per_token(case) == pytest.approx(case.measured, rel=0.01)


# ---------------------------------------------------------------- the loss path: peak bytes per logit

LOSS_PEAK = """
import sys, torch
from torch.profiler import ProfilerActivity, profile
from transformers import LlamaConfig, LlamaForCausalLM

V, B, S = 32000, 2, 512
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=V)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
ids = torch.randint(0, V, (B, S))
held = []


def compute_loss(batch):  # as transformers' Trainer.compute_loss: the outputs die with it, the loss goes back
    outputs = model(input_ids=batch, labels=batch)
    if sys.argv[1] == "held":
        held.append(outputs)
    return outputs.loss


compute_loss(ids[:, :8]).backward()  # kernels and autograd warmed up
model.zero_grad(set_to_none=True)
held.clear()
with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    compute_loss(ids).backward()
totals = []  # the CPU allocator's bytes in live tensors after each allocation or free


def walk(nodes):
    for node in nodes:
        if type(node.extra_fields).__name__ == "_ExtraFields_Allocation":
            totals.append(node.extra_fields.total_allocated)
        walk(node.children)


walk(prof.profiler.kineto_results.experimental_event_tree())
print((max(totals) - totals[0]) / (B * S * V))
"""


def peak_bytes_per_logit(outputs: str) -> float:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", LOSS_PEAK, outputs], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(proc.stdout.split()[-1])


def test_the_loss_paths_peak_bytes_per_logit_match_the_planners():
    """Measured: the peak of the bytes PyTorch's CPU allocator holds in live tensors (the profiler's allocation
    events, each with the allocator's running total) over one bf16 forward + backward of a 1-layer Llama with a
    32k vocabulary, run as the Trainer runs it (compute_loss returns only the loss), per logit (2 x 512 x 32000
    of them; the model and its gradients are ~8 MB, 0.25 byte per logit). Live tensors, not the resident set:
    the same ops allocate the same bytes on any machine (12.09 here, 14.09 with the outputs held), while the
    resident set also moves with what the machine does (pages reclaimed before the step and faulted back in it,
    the C allocator's slack): it read 12.02 here and 13.65 on a CI machine with the same code.
    The planner's LOGITS_BYTES_PER_ENTRY must be within 5% of it, and 2 bytes (the bf16 logits) below the peak
    of a caller that keeps the outputs through backward, which the Trainer does not."""
    from rocmft.plan import activations

    trainer, held = peak_bytes_per_logit("dropped"), peak_bytes_per_logit("held")
    assert activations.LOGITS_BYTES_PER_ENTRY == pytest.approx(trainer, rel=0.05), trainer
    assert held - trainer == pytest.approx(2, abs=0.1), (trainer, held)


# ---------------------------------------------------------------- a mixture-of-experts layer

MOE = {
    "qwen3_moe": dict(model_type="qwen3_moe", hidden_size=512, intermediate_size=1376, moe_intermediate_size=128,
                      num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=2, head_dim=64, num_experts=16,
                      num_experts_per_tok=4, vocab_size=1000),
    "gpt_oss": dict(model_type="gpt_oss", hidden_size=512, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=64, num_local_experts=8,
                    num_experts_per_tok=2, vocab_size=1000),
}


def moe_saved_bytes_per_token(cfg: dict, autocast: bool) -> float:
    """One decoder layer of the family, LoRA on what `all` finds (attention only), transformers' default experts
    implementation (grouped_mm). Attention is SDPA here for both (gpt-oss trains eager: its seq x seq scores are
    planned apart, activations_gib), so the per-token difference holds the layer's own tensors only."""
    import transformers
    from peft import LoraConfig, get_peft_model

    config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = "sdpa"
    config._experts_implementation = "grouped_mm"  # what from_pretrained picks (get_correct_experts_implementation)
    kind = cfg["model_type"]
    module = __import__(f"transformers.models.{kind}.modeling_{kind}", fromlist=["x"])
    prefix = {"qwen3_moe": "Qwen3Moe", "gpt_oss": "GptOss"}[kind]
    layer_class, rope_class = getattr(module, f"{prefix}DecoderLayer"), getattr(module, f"{prefix}RotaryEmbedding")
    torch.manual_seed(0)
    model = OneLayer(layer_class(config, 0), rope_class(config))
    for p in model.parameters():  # the experts are torch.empty: give the router something to choose by
        torch.nn.init.normal_(p, std=0.02)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    return per_token(bf16_with_adapters(model, autocast), cfg["hidden_size"], autocast)


@pytest.mark.parametrize("autocast", [True, False], ids=["fp32-adapters", "bf16-adapters"])
@pytest.mark.parametrize("kind", list(MOE))
def test_a_moe_layers_saved_tensors_match_the_planner(kind, autocast):
    """The MoE terms (activations.routing_bytes, the top-k experts' width, gpt-oss's clamped SwiGLU) against what
    autograd saves: within 12% (the routing copies depend on how the experts implementation gathers tokens)."""
    from dataclasses import replace

    from rocmft.plan import activations, check, models
    from tests.unit.plan.conftest import make_recipe

    result = check(make_recipe(arch="cpu", model_name_or_path="x", plan={"model": MOE[kind]}, cutoff_len=256), strict=True)
    w = replace(result.workload, precision="bf16", attention="sdpa", pure_bf16=not autocast, lora_dropout=0.0)
    assert isinstance(w.model, models.ModelSpec) and w.lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj")
    planned = activations.layer_activation_bytes(w)
    assert planned == pytest.approx(moe_saved_bytes_per_token(MOE[kind], autocast), rel=0.12)
