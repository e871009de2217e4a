"""The CPU measurement behind the planner's per-layer activation bytes, run for real: one transformers
LlamaDecoderLayer (with PEFT LoRA where the case says), a forward pass under
torch.autograd.graph.saved_tensors_hooks, and the bytes of every distinct tensor autograd saved per token.
The figures must match the table in test_plan_calibration.py (which the planner is checked against)."""

from __future__ import annotations

import pytest

from tests.unit.plan.test_plan_calibration import LAYERS, SMALL

torch = pytest.importorskip("torch", reason="the measurement needs the CPU training stack (make setup)")
pytest.importorskip("peft", reason="the measurement needs the CPU training stack (make setup)")


def saved_bytes_per_token(case) -> float:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer,
        LlamaRotaryEmbedding,
    )

    cfg = LlamaConfig(**{k: v for k, v in SMALL.items() if k != "model_type"})
    cfg._attn_implementation = "sdpa"

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = LlamaDecoderLayer(cfg, 0)
            self.rope = LlamaRotaryEmbedding(cfg)

        def forward(self, x):
            pos = torch.arange(x.shape[1])[None]
            out = self.layer(x, position_embeddings=self.rope(x, pos), attention_mask=None, position_ids=pos)
            return out[0] if isinstance(out, tuple) else out

    torch.manual_seed(0)
    model = Wrap()
    lora = case.changes.get("method") != "full"
    autocast = lora and not case.changes.get("pure_bf16")  # LLaMA-Factory's fp32 adapters under autocast
    if lora:
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=case.changes["lora_dropout"],
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                                 "gate_proj", "up_proj", "down_proj"]))
    model = model.to(torch.bfloat16)
    for p in model.parameters():
        if autocast and p.requires_grad:
            p.data = p.data.float()
    model.train()

    def saved(batch: int, seq: int) -> int:
        x = torch.randn(batch, seq, SMALL["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
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

    # The difference between two lengths leaves out what does not grow with tokens (weights, autocast's
    # weight copies, RoPE tables): bytes per token.
    return (saved(2, 256) - saved(2, 128)) / (2 * 128)


@pytest.mark.parametrize("case", LAYERS, ids=[c.name for c in LAYERS])
def test_measured_saved_tensors_match_the_calibration_table(case):
    assert saved_bytes_per_token(case) == pytest.approx(case.measured, rel=0.01)


# ---------------------------------------------------------------- the loss path: peak bytes per logit

LOSS_PEAK = """
import resource, torch
from transformers import LlamaConfig, LlamaForCausalLM

V, B, S = 32000, 2, 512
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=V)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
ids = torch.randint(0, V, (B, S))


def compute_loss(batch):  # as transformers' Trainer.compute_loss: the outputs die with it, the loss goes back
    outputs = model(input_ids=batch, labels=batch)
    return outputs.loss


compute_loss(ids[:, :8]).backward()  # allocator, kernels and threads warmed up
model.zero_grad(set_to_none=True)
with open("/proc/self/status") as fh:
    now = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) * 1024
compute_loss(ids).backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print((peak - now) / (B * S * V))
"""


def test_the_loss_paths_peak_bytes_per_logit_match_the_planners():
    """Measured: a fresh interpreter's peak resident set over one bf16 forward + backward of a 1-layer Llama
    with a 32k vocabulary, run as the Trainer runs it (compute_loss returns only the loss), above what it held
    just before, per logit (2 x 512 x 32000 of them: ~400 MB; the model itself is ~4 MB). Tensors this large
    are mmap'd and given back on free by glibc, so the resident set follows what is live. The planner's
    LOGITS_BYTES_PER_ENTRY must be within 10% of it."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", LOSS_PEAK], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    measured = float(proc.stdout.split()[-1])
    from rocmft.plan import activations

    assert activations.LOGITS_BYTES_PER_ENTRY == pytest.approx(measured, rel=0.10), measured
