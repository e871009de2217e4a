"""Expected throughput: FLOPs per token for the method, the arch's dense peak, an explicit utilisation range.

FLOPs per trained token (2 FLOPs per multiply-add; N = weights that take part in a matmul: the decoder
linears + lm_head; d = heads x head_dim; s = cutoff_len):
- forward: 2N + 4*L*d*s (QK^T and AV, counted over the full sequence as in Chowdhery et al. 2022, "PaLM",
  appendix B, which gives 6N + 12*L*d*s for a full training step; Kaplan et al. 2020 give the 6N part);
- full fine-tuning backward: 4N (input and weight gradients) + 8*L*d*s;
- LoRA backward: 2N (input gradients only: frozen weights get no weight gradient) + 8*L*d*s, plus 6 FLOPs per
  adapter parameter - why LoRA steps are ~25% cheaper than full ones (Hu et al. 2021, "LoRA", sec. 4.2);
- freeze: backward through the trainable top layers and lm_head only;
- gradient checkpointing: one more forward of every layer that runs backward (Chen et al. 2016, "Training
  Deep Nets with Sublinear Memory Cost").
tokens/s/GPU = utilisation x peak / FLOPs per token x the speed factors below. The utilisation counts the
FLOPs actually executed (recompute included), so turning checkpointing off shows up as a speed-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .dataset import DatasetSize
from .memory import lora_params
from .workload import Workload

# Speed factors on top of the utilisation range: planning assumptions, to be replaced by `make bench` figures.
# ZeRO-3 all-gathers weights in forward and backward: 1.5x the communication of DDP/ZeRO-2 (ZeRO paper,
# Rajbhandari et al. 2020, sec. 7), not overlapped with compute in ds_configs/zero3*.json.j2 (overlap_comm false).
ZERO3_FACTOR = 0.9
# ZeRO-Offload runs Adam on the CPU and moves weights and gradients over PCIe every step (Ren et al. 2021,
# "ZeRO-Offload", sec. 4); with offload_param too, every forward and backward streams the weights in.
OFFLOAD_FACTOR = 0.5
# bitsandbytes dequantizes each weight before its matmul: QLoRA steps are slower than LoRA ones at the same
# FLOPs (4-bit: the QLoRA paper's sec. 5 trades speed for memory; LLM.int8 matmuls are slower still).
QUANT_FACTORS = {4: 0.7, 8: 0.5}
# Micro-batches under this many tokens leave the matrix cores under-filled.
SMALL_MICRO_BATCH_TOKENS = 2048
SMALL_MICRO_BATCH_FACTOR = 0.85


@dataclass(frozen=True)
class TimeEstimate:
    steps: int
    samples: float
    tokens: float  # at most: every sample counted at cutoff_len (or plan.avg_tokens)
    seconds: tuple[float, float]  # (fast end, slow end)
    what: str  # "3.0 epochs of demo_alpaca (78 rows)" / "12 steps"
    upper_bound: bool


@dataclass(frozen=True)
class ThroughputPlan:
    flops_per_token: float
    flops_parts: tuple[tuple[str, float], ...]
    peak_tflops: float | None
    mfu: tuple[float, float]
    factors: tuple[tuple[str, float], ...]
    tokens_per_s_gpu: tuple[float, float] | None  # None without a known peak
    time: TimeEstimate | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def factor(self) -> float:
        return math.prod(f for _, f in self.factors)


def flops_per_token(w: Workload) -> tuple[float, tuple[tuple[str, float], ...]]:
    m = w.model
    L = m.num_hidden_layers
    n_layer = m.layer_linear_params
    n_layers = L * n_layer
    n_head = m.vocab_size * m.hidden_size
    attn = 4.0 * m.q_dim * w.cutoff_len  # per layer, forward
    fwd = 2.0 * (n_layers + n_head) + L * attn
    parts = [("forward 2N + 4Lds", fwd)]
    if w.method == "full":
        bwd = 4.0 * (n_layers + n_head) + 2 * L * attn
        back_layers = L
        parts.append(("backward 4N + 8Lds (input + weight gradients)", bwd))
    elif w.method == "lora":
        adapters = lora_params(w)
        bwd = 2.0 * (n_layers + n_head) + 2 * L * attn + 6.0 * adapters
        back_layers = L
        parts.append(("backward 2N + 8Lds (input gradients; frozen weights get none) + 6 x adapters", bwd))
    else:  # freeze
        k = min(abs(w.freeze_layers), L)
        if w.freeze_layers > 0:  # the top k layers: backward stops below them
            bwd = 2.0 * n_head + 4.0 * k * n_layer + 2 * k * attn
            back_layers = k
        else:  # the bottom k layers: gradients flow through every layer
            bwd = 2.0 * (n_layers + n_head) + 2.0 * k * n_layer + 2 * L * attn
            back_layers = L
        parts.append((f"backward through {back_layers} layer(s), weight gradients for {k}", bwd))
    if w.gradient_checkpointing:
        parts.append(("recompute: one more forward of the checkpointed layers", back_layers * (2.0 * n_layer + attn)))
    return sum(v for _, v in parts), tuple(parts)


def speed_factors(w: Workload) -> tuple[tuple[str, float], ...]:
    factors = []
    if w.zero_stage == 3 and w.world_size > 1:
        factors.append(("ZeRO-3 weight all-gathers", ZERO3_FACTOR))
    if w.offload:
        factors.append(("CPU offload (Adam on CPU, PCIe traffic)", OFFLOAD_FACTOR))
    if w.quant_bits:
        factors.append((f"{w.quant_bits}-bit weight dequantization", QUANT_FACTORS.get(w.quant_bits, 0.6)))
    if w.tokens_per_micro_batch < SMALL_MICRO_BATCH_TOKENS:
        factors.append((f"micro-batch under {SMALL_MICRO_BATCH_TOKENS} tokens", SMALL_MICRO_BATCH_FACTOR))
    return tuple(factors)


def relative_speed(new: Workload, old: Workload) -> float:
    """Throughput of `new` over `old` under the same utilisation assumption (> 1: faster)."""
    f_new, _ = flops_per_token(new)
    f_old, _ = flops_per_token(old)
    s_new = math.prod(f for _, f in speed_factors(new))
    s_old = math.prod(f for _, f in speed_factors(old))
    return (s_new / f_new) / (s_old / f_old)


def estimate(w: Workload, data: DatasetSize | None, steps: int | None = None) -> ThroughputPlan:
    flops, parts = flops_per_token(w)
    factors = speed_factors(w)
    factor = math.prod(f for _, f in factors)
    notes: list[str] = []
    tps = None
    if w.peak_tflops:
        lo, hi = w.mfu
        tps = (lo * w.peak_tflops * 1e12 / flops * factor, hi * w.peak_tflops * 1e12 / flops * factor)
    time = None
    per_sample = w.avg_tokens and min(w.avg_tokens, w.cutoff_len) or w.cutoff_len
    if steps is not None:
        samples = float(steps * w.global_batch)
        what = f"{steps} steps of {w.global_batch} samples"
        n_steps = steps
    elif w.max_steps > 0:
        samples = float(w.max_steps * w.global_batch)
        what = f"max_steps={w.max_steps} of {w.global_batch} samples"
        n_steps = w.max_steps
    elif data is not None and data.rows is not None:
        per_epoch = max(math.ceil(data.rows / (w.micro_batch * w.world_size)) // w.grad_accum, 1)
        n_steps = math.ceil(w.epochs * per_epoch)
        samples = data.rows * w.epochs
        what = f"{w.epochs:g} epoch(s) of {','.join(data.names)} ({data.rows:,} rows)"
    else:
        samples = 0.0
        n_steps = 0
        what = ""
        reason = "; ".join(data.notes) if data is not None and data.notes else "dataset size unknown"
        notes.append(f"no time estimate: {reason} (set max_steps, or STEPS= for a fixed number of steps)")
    if samples and tps is not None:
        tokens = samples * per_sample
        secs = (tokens / (tps[1] * w.world_size), tokens / (tps[0] * w.world_size))
        time = TimeEstimate(n_steps, samples, tokens, secs, what, upper_bound=not w.avg_tokens)
    elif samples:
        tokens = samples * per_sample
        time = TimeEstimate(n_steps, samples, tokens, (0.0, 0.0), what, upper_bound=not w.avg_tokens)
    if tps is None:
        notes.insert(0, f"no known {w.precision} peak for {w.arch} in docker/arches.yaml: memory plan only, no throughput")
    return ThroughputPlan(flops, parts, w.peak_tflops, w.mfu, factors, tps, time, tuple(notes))
