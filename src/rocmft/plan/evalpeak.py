"""GPU memory at an evaluation pass: what training holds between steps, plus the eval forward's logits.

Liger's fused linear cross-entropy runs in training only (its forward checks `self.training`): an eval forward
materialises the full logits, and transformers' ForCausalLMLoss upcasts them to fp32 for the loss - the bf16
logits, their fp32 copy and the fp32 log-softmax, 10 bytes per token per vocabulary entry
(activations.LOGITS_FORWARD_BYTES, measured on CPU). The Trainer's prediction_loss_only (no compute_metrics, as
LLaMA-Factory's SFT runs) drops them once the loss is taken, so one eval micro-batch's worth is alive at a time.
Packed rows are evaluated packed (LLaMA-Factory splits val_size off the packed dataset): an eval micro-batch of
b holds b x cutoff_len tokens. At per_device_eval_batch_size 4 and Qwen2.5's 152k vocabulary that is 12.5 GB at
2048 tokens: more than a 24 GB card has beside a 14B QLoRA (issue 48).
"""

from __future__ import annotations

from . import activations as act
from .workload import Workload


def eval_tokens(w: Workload) -> int:
    """Tokens of the longest eval micro-batch: packed rows are full, padded ones as long as the longest row."""
    per_row = w.tokens_per_micro_batch // (w.micro_batch * w.sequences_per_sample)
    return w.eval_batch * w.sequences_per_sample * per_row


def transient_gib(w: Workload) -> tuple[float, str]:
    """(GiB, what) an eval forward adds: its logits and one layer's working set (nothing is kept for backward)."""
    tokens = eval_tokens(w)
    m = w.model
    logits = tokens * m.vocab_size * act.LOGITS_FORWARD_BYTES
    layer = tokens * act.act_bytes(w) * (2 * m.hidden_size + 3 * m.intermediate_size)
    return (logits + layer) / act.GIB, (f"per_device_eval_batch_size={w.eval_batch} x {tokens // max(w.eval_batch, 1):,} "
                                         f"tokens: full logits, {act.LOGITS_FORWARD_BYTES} bytes per entry "
                                         f"{logits / act.GIB:.1f} GiB")
