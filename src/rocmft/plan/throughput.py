"""Expected throughput: model FLOPs per token, the arch's dense peak, a utilisation range, speed factors.

FLOPs per trained token (2 FLOPs per multiply-add; N = weights that take part in a matmul: the decoder
linears + lm_head; d = heads x head_dim; s = cutoff_len):
- forward: 2N + 4*L*d*s (QK^T and AV, counted over the full sequence as in Chowdhery et al. 2022, "PaLM",
  appendix B, which gives 6N + 12*L*d*s for a full training step; Kaplan et al. 2020 give the 6N part);
- full fine-tuning backward: 4N (input and weight gradients) + 8*L*d*s;
- LoRA backward: 2N (input gradients only: frozen weights get no weight gradient) + 8*L*d*s, plus 6 FLOPs per
  adapter parameter - why LoRA steps are ~25% cheaper than full ones (Hu et al. 2021, "LoRA", sec. 4.2);
- freeze: backward through the trainable top layers and lm_head only.
Preference stages count per trained sequence (DPO: a pair is two, chosen and rejected; the real tokens/s is
of both, as the Trainer counts them) and add the forwards without gradients: DPO's reference over the same
sequences (none for ORPO and SimPO), KTO's KL estimate and the reference over both (`Workload.extra_forwards`).
These are model FLOPs: the utilisation (MFU) is counted without recomputed FLOPs, as the published anchors
(PaLM's MFU, the arch table's sources) count it. tokens/s/GPU = MFU x peak / model FLOPs per token x the speed
factors below; gradient checkpointing's extra forward (Chen et al. 2016, "Training Deep Nets with Sublinear
Memory Cost") is one of them, so the utilisation range is that of a run without recompute. The attention
FLOPs are counted over every pair (PaLM's count, no causal halving) while the runs behind the utilisation
figures used causal kernels that compute half of them: a path with an explicit mask, which computes them all,
gets a speed factor (attention_kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import batching, quant, steptime, zero3
from .dataset import DatasetSize
from .memory import lora_params, param_counts
from .workload import Workload

# Speed factors on top of the utilisation range: planning assumptions, to be replaced by `make bench` figures.
# Held to outside figures: the measured H200 rows (tests/unit/benchmarks/test_gpu_truth.py) and, on MI300X, AMD's MLPerf
# Training v5.1 Llama-2-70B LoRA throughput (mlcommons/training_results_v5.1, AMD/results/MI300X_EPYC_9575F_pytorch_
# llama2_70b: 2,166 tokens/s/GPU in FP8; tests/unit/plan/test_published_throughput.py states the setup's differences
# and the band they allow: the planned bf16 figure is 0.38 of it, inside 0.25-0.82; nothing here was tuned to it).
# PEFT runs each adapter unfused (peft/tuners/lora/layer.py Linear.forward: a cast, dropout, two rank-r
# GEMMs far from peak, a scale and an add, each a pass over memory, forward and backward): on MI300X that is
# ~130 MB per token for Llama-3-8B (all linears), ~30% of the step at 5.3 TB/s against the GEMMs' time.
LORA_FACTOR = 0.75
# ZeRO-3 gathers every weight in forward and again in backward for each micro-batch and reduce-scatters the
# trainable gradients. Without overlap_comm both run on the compute stream (deepspeed/runtime/zero/
# parameter_offload.py: the all-gather stream is the default stream; stage3.py likewise the reduction stream):
# nothing is hidden. With it (ds_configs/zero3*.json.j2) they run on side streams while the layer before computes
# (prefetch, stage3_prefetch_bucket_size): assumed to hide up to 80% of the communication, never more than the
# compute time itself (the first layer's gather, bucket boundaries and RCCL's own CU use stay exposed).
# Link bandwidth per GPU, GB/s, at an assumed 70% of the datasheet: MI300X/MI355X 7 Infinity Fabric links x
# 64 GB/s each way (AMD datasheets); MI250X GCDs ~200 GB/s of xGMI; Radeon cards over PCIe 4.0/5.0 x16
# (32/64 GB/s); between nodes one 400 Gb/s NIC per Instinct GPU (50 GB/s), 100 Gb/s for workstations.
OVERLAP_HIDDEN = 0.8
LINK_GBPS = {"cdna3": 310.0, "cdna4": 310.0, "cdna2": 140.0, "rdna3": 22.0, "rdna2": 22.0, "rdna4": 45.0}
# Every pair of an MI300X node's 8 GPUs has a link of its own: a collective over 2 or 4 of them uses only the
# links between them, a fraction of the node's bandwidth (AMD's MI300X workload optimization guide, RCCL, "Use
# all eight GPUs": https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/workload.html).
FULL_MESH_LINKS = {"cdna3": 7, "cdna4": 7}
NODE_LINK_GBPS = {"cdna3": 35.0, "cdna4": 35.0, "cdna2": 17.0}
DEFAULT_LINK_GBPS, DEFAULT_NODE_LINK_GBPS = 22.0, 8.7
ZERO3_FACTOR_NO_PEAK = 0.9  # an arch without a peak (no compute time to compare against): a flat guess
# ZeRO-Offload runs Adam on the CPU and moves weights and gradients over PCIe every step (Ren et al. 2021,
# "ZeRO-Offload", sec. 4); with offload_param too, every forward and backward streams the weights in.
OFFLOAD_FACTOR = 0.5
# Optimizer-only offload: forward and backward are plain ZeRO-3; the CPU Adam step and one gradient/weight
# round trip over PCIe come once per optimizer step, spread over its accumulated micro-batches. A planning
# assumption until measured (ZeRO-Offload's own 1-GPU runs kept most of the GPU's throughput, sec. 6).
OFFLOAD_OPTIMIZER_FACTOR = 0.8
# Quantised base weights: 4 bits costs the dequantisation traffic (quant.py, by the micro-batch's tokens and the
# arch's FLOPs per byte); LLM.int8 and the other widths a flat factor (quant.INT8_FACTOR).
# Micro-batches under this many tokens leave the matrix cores under-filled.
SMALL_MICRO_BATCH_TOKENS = 2048
SMALL_MICRO_BATCH_FACTOR = 0.85
@dataclass(frozen=True)
class TimeEstimate:
    steps: int
    samples: float
    tokens: float  # real tokens; an upper bound (every row at cutoff_len) when the lengths are unknown
    seconds: tuple[float, float]  # (fast end, slow end)
    what: str  # "3.0 epochs of demo_alpaca (78 rows)" / "12 steps"
    upper_bound: bool


@dataclass(frozen=True)
class ThroughputPlan:
    flops_per_token: float
    flops_parts: tuple[tuple[str, float], ...]
    peak_tflops: float | None
    mfu: tuple[float, float]
    factors: tuple[tuple[str, float], ...]  # the GPU's speed factors
    tokens_per_s_gpu: tuple[float, float] | None  # None without a known peak
    time: TimeEstimate | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    host: tuple[tuple[str, tuple[float, float]], ...] = ()  # the host's terms (steptime.py): (fast end, slow end)

    @property
    def factor(self) -> float:
        """The GPU's speed factors (the host's terms are per end: `host`)."""
        return math.prod(f for _, f in self.factors)

    @property
    def effective_mfu(self) -> tuple[float, float] | None:
        """Model FLOPs over the peak at the planned tokens/s: the utilisation after every factor, host time included."""
        if self.tokens_per_s_gpu is None or not self.peak_tflops:
            return None
        return (self.tokens_per_s_gpu[0] * self.flops_per_token / (self.peak_tflops * 1e12),
                self.tokens_per_s_gpu[1] * self.flops_per_token / (self.peak_tflops * 1e12))


def batches(w: Workload) -> batching.Batching | None:
    """Real and computed tokens per micro-batch from the rows' lengths; None when they are unknown."""
    if w.lengths is None:
        return None
    if w.stage == "pt" and w.packing == "packing":
        return batching.blocks(w.lengths, w.micro_batch, w.cutoff_len)
    # a DPO row is a pair: its chosen and rejected sequences are two lengths (lengths.py), padded together
    return batching.compute(w.lengths, w.micro_batch * w.sequences_per_sample, w.cutoff_len, w.packing, w.attention)


def attention_span(w: Workload) -> float:
    """Tokens one token's attention spans: the padded length, the packed row (SDPA), or its own sample (FA2)."""
    b = batches(w)
    return b.attn_span if b is not None else float(w.cutoff_len)


def computed_tokens(w: Workload) -> float:
    b = batches(w)
    return b.computed if b is not None else float(w.tokens_per_micro_batch)


def attention_kernel(w: Workload) -> tuple[bool, str]:
    """(whether the kernel skips the causal mask's upper triangle, which kernel and why) for the recipe's path.

    flash-attn (and its varlen route) is causal: blocks above the diagonal are never computed. transformers 5.x
    hands SDPA `is_causal=True` and no mask only when no token is masked (masking_utils._ignore_causal_mask_sdpa:
    an all-ones 2D mask, as plain `packing` builds, its tail included); PyTorch's flash kernels then skip the
    upper blocks (on CPU: aten/src/ATen/native/cpu/FlashAttentionKernel.cpp). An explicit mask - neat_packing's
    4D block-diagonal one (returned as-is by _preprocess_mask_arguments), a padded micro-batch's padding - makes
    SDPA score every pair, then mask (and, with GQA, repeat K/V: integrations/sdpa_attention.py
    use_gqa_in_sdpa); eager always does.
    """
    if w.attention == "fa2":
        return True, "flash-attn, causal"
    if w.attention in ("disabled", "eager"):
        return False, "eager attention scores every pair, then masks"
    local = w.model.num_hidden_layers - w.model.layers_of("full_attention")
    if local:  # transformers builds a sliding-window (or chunked) mask for those layers: no is_causal shortcut
        return False, f"SDPA with a sliding-window mask scores every pair in {local} local-attention layers"
    if w.packing == "neat_packing":
        return False, "SDPA with neat_packing's 4D mask scores every pair"
    b = batches(w)
    if w.packing == "padded" and b is not None and b.padding > 0:
        return False, "SDPA with a padding mask scores every pair"
    return True, "SDPA is_causal (no mask to pass)"


def layer_spans(w: Workload) -> list[float]:
    """Each layer's attended span in PaLM's count (every pair of the span: twice what a causal kernel computes).
    A sliding layer of window W costs a causal kernel ~W per token, PaLM's count of a span 2W; a chunked layer
    (llama4) of chunk C costs ~C/2, the count of a span C; neither more than the span itself (layer_types)."""
    m, span = w.model, attention_span(w)
    kinds = m.layer_types or ("full_attention",) * m.num_hidden_layers
    local = {"sliding_attention": 2 * (m.window or span), "chunked_attention": m.window or span}
    return [min(span, local.get(kind, span)) for kind in kinds]


def counted_span(w: Workload) -> float:
    """The mean attended span over the layers (= attention_span for a model of full-attention layers only)."""
    spans = layer_spans(w)
    return sum(spans) / len(spans)


def _passes(w: Workload) -> int:
    L = w.model.num_hidden_layers
    back = min(abs(w.freeze_layers), L) if w.method == "freeze" and w.freeze_layers > 0 else L
    return L + 2 * back + (back if w.gradient_checkpointing else 0)


def attention_flops(w: Workload) -> float:
    """The attention part (QK^T, AV) of one token's model FLOPs plus its recompute: forward once, backward twice,
    again with gradient checkpointing, in every layer that runs it."""
    return _passes(w) * 4.0 * w.model.q_dim * counted_span(w)


def attention_factor(w: Workload, flops: float) -> float:
    """Time of a causal kernel's work over this path's, for `flops` per token (model + recompute): the published
    utilisation figures come from causal kernels, which compute half of the attention FLOPs counted (PaLM's
    count); an explicit mask computes every pair of the span, in a local-attention layer too."""
    skips, _ = attention_kernel(w)
    if skips:
        return 1.0
    counted = attention_flops(w)
    every_pair = _passes(w) * 4.0 * w.model.q_dim * attention_span(w)
    return (flops - counted / 2) / (flops - counted + every_pair)


def flops_per_token(w: Workload) -> tuple[float, tuple[tuple[str, float], ...]]:
    m = w.model
    L = m.num_hidden_layers
    n_layer = m.layer_linear_params
    n_layers = L * n_layer
    n_head = m.vocab_size * m.hidden_size
    attn = 4.0 * m.q_dim * counted_span(w)  # per layer, forward
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
    if w.extra_forwards:
        what = "reference" if w.stage == "dpo" else "KL estimate + reference on both"
        parts.append((f"{w.extra_forwards} forward(s) without gradients ({what})", w.extra_forwards * fwd))
    return sum(v for _, v in parts), tuple(parts)


def recompute_flops(w: Workload) -> float:
    """Gradient checkpointing's extra forward of every layer that runs backward (not model FLOPs)."""
    if not w.gradient_checkpointing:
        return 0.0
    m = w.model
    back_layers = min(abs(w.freeze_layers), m.num_hidden_layers) if w.method == "freeze" and w.freeze_layers > 0 \
        else m.num_hidden_layers
    return back_layers * (2.0 * m.layer_linear_params + 4.0 * m.q_dim * counted_span(w))


def link_gbps(w: Workload) -> float:
    """GB/s per GPU a collective over the run's GPUs gets (LINK_GBPS, FULL_MESH_LINKS)."""
    gbps = (NODE_LINK_GBPS.get(w.arch_family, DEFAULT_NODE_LINK_GBPS) if w.nodes > 1
            else LINK_GBPS.get(w.arch_family, DEFAULT_LINK_GBPS))
    links = FULL_MESH_LINKS.get(w.arch_family)
    if links and w.nodes == 1:
        gbps *= min(w.world_size - 1, links) / links
    return gbps


def zero3_factor(w: Workload, flops: float | None = None) -> float:
    """Compute time over compute + exposed communication for one micro-batch under ZeRO-3 (see LINK_GBPS): the
    partitioned weights gathered for forward and backward, the trainable gradients reduce-scattered."""
    if not w.peak_tflops:
        return ZERO3_FACTOR_NO_PEAK
    flops = flops if flops is not None else flops_per_token(w)[0] + recompute_flops(w)
    share = (w.world_size - 1) / w.world_size
    b16 = 2 if w.precision in ("bf16", "fp16") else 4
    gathered = zero3.partitioned(w) * b16 * (2 + w.extra_forwards) * share  # forward, backward (+ forwards w/o grad)
    reduced = param_counts(w).trainable * b16 * share  # gradient reduce-scatter
    comm = (gathered + reduced) / (link_gbps(w) * 1e9)
    # an explicit attention mask lengthens the compute the gathers can hide behind
    compute = computed_tokens(w) * flops / attention_factor(w, flops) / (sum(w.mfu) / 2 * w.peak_tflops * 1e12)
    hidden = min(OVERLAP_HIDDEN * comm, compute) if w.ds_overlap_comm else 0.0
    return compute / (compute + comm - hidden)


def quant_factor(w: Workload, flops: float) -> tuple[str, float]:
    """Compute time over compute + dequantisation for one micro-batch of a quantised base."""
    if w.quant_bits != 4:
        return f"{w.quant_bits}-bit weights (LLM.int8 / other kernels)", quant.INT8_FACTOR
    passes = 2 + (1 if w.gradient_checkpointing else 0) + w.extra_forwards  # forward, input grad, recompute, no-grad
    weights = w.model.linear_params  # the quantised nn.Linear weights (routed experts stay in the compute dtype)
    per_weight = flops / weights  # the step's FLOPs per token per quantised weight
    over = quant.dequant_overhead(w.arch_family, sum(w.mfu) / 2, computed_tokens(w), per_weight, passes)
    return (f"4-bit dequantisation: {passes} per weight per micro-batch of {computed_tokens(w):.0f} tokens",
            1 / (1 + over))


def speed_factors(w: Workload) -> tuple[tuple[str, float], ...]:
    factors = []
    model, extra = flops_per_token(w)[0], recompute_flops(w)
    if extra:
        factors.append(("gradient checkpointing recompute", model / (model + extra)))
    if w.method == "lora":
        factors.append(("PEFT LoRA adapters, unfused", LORA_FACTOR))
    skips, kernel = attention_kernel(w)
    if not skips:
        factors.append((f"attention: {kernel} (a causal kernel skips half)", attention_factor(w, model + extra)))
    b = batches(w)
    if b is not None and b.padding > 0.005:
        factors.append((f"padding: {b.padding:.0%} of the computed tokens ({b.mode})", b.real_fraction))
    if w.zero_stage == 3 and w.world_size > 1 and not w.offload_params:
        where = f"{w.nodes} nodes" if w.nodes > 1 else "one node"
        overlap = ", overlapped" if w.ds_overlap_comm else ", on the compute stream"
        what = "gathers" if zero3.partitioned(w) else "gradient reduce-scatter (nothing partitioned)"
        factors.append((f"ZeRO-3 {what} per micro-batch of {computed_tokens(w):.0f} tokens ({where}{overlap})",
                        zero3_factor(w, model + extra)))
    if w.offload_params:
        factors.append(("CPU offload of weights and optimizer (weights over PCIe every pass)", OFFLOAD_FACTOR))
    elif w.offload:
        factors.append(("CPU offload of the optimizer (CPU Adam, once per step)", OFFLOAD_OPTIMIZER_FACTOR))
    if w.quant_bits:
        factors.append(quant_factor(w, model + extra))
    if computed_tokens(w) < SMALL_MICRO_BATCH_TOKENS:
        factors.append((f"micro-batch under {SMALL_MICRO_BATCH_TOKENS} tokens", SMALL_MICRO_BATCH_FACTOR))
    return tuple(factors)


def gpu_rate(w: Workload) -> tuple[float, float] | None:
    """Tokens/s per GPU of the GPU's work alone (the utilisation range x the speed factors); None without a peak."""
    flops = flops_per_token(w)[0]
    factor = math.prod(f for _, f in speed_factors(w))
    if w.peak_tflops:
        lo, hi = w.mfu
        tps = (lo * w.peak_tflops * 1e12 / flops * factor, hi * w.peak_tflops * 1e12 / flops * factor)
        return tps
    return None


def rate(w: Workload) -> tuple[tuple[float, float], tuple] | None:
    """Real tokens/s per GPU with the host's time (steptime.py), and the host's terms as factors; None without a
    peak. The one rate every speed the planner states comes from."""
    tps = gpu_rate(w)
    b = batches(w)
    real = b.real if b is not None else float(w.tokens_per_micro_batch)  # real tokens per micro-batch
    if tps is None or real <= 0:
        return None
    step_real = max(w.grad_accum, 1) * real
    gpu_s = (step_real / tps[1], step_real / tps[0])  # (fast end, slow end)
    fast, slow = steptime.step_seconds(w, gpu_s, link_gbps(w))
    return (step_real / slow, step_real / fast), steptime.shown(w, gpu_s, link_gbps(w))


def relative_speed(new: Workload, old: Workload) -> float:
    """Throughput of `new` over `old` (> 1: faster): the middles of their planned tokens/s per GPU (rate), what the
    two plans print. An arch without a peak has no planned rate: there, the GPU's speed factors per FLOP alone."""
    r_new, r_old = rate(new), rate(old)
    if r_new is not None and r_old is not None:
        return sum(r_new[0]) / sum(r_old[0])
    return gpu_relative_speed(new, old)


def gpu_relative_speed(new: Workload, old: Workload) -> float:
    """The GPU's share of relative_speed: speed factors per model FLOP, the host's time left out."""
    f_new, f_old = flops_per_token(new)[0], flops_per_token(old)[0]
    s_new = math.prod(f for _, f in speed_factors(new))
    s_old = math.prod(f for _, f in speed_factors(old))
    return (s_new / f_new) / (s_old / f_old)


def estimate(w: Workload, data: DatasetSize | None, steps: int | None = None) -> ThroughputPlan:
    flops, parts = flops_per_token(w)
    factors = speed_factors(w)
    notes: list[str] = []
    planned = rate(w)
    tps, host = planned if planned is not None else (gpu_rate(w), ())
    time = None
    b = batches(w)
    real = b.real if b is not None else float(w.tokens_per_micro_batch)  # real tokens per micro-batch
    unit = "packed rows" if w.packing != "padded" else "samples"
    if b is not None and b.mode == "blocks" and not b.rows:
        notes.append(f"the text holds ~{sum(w.lengths.tokens):,} tokens, less than one block of cutoff_len - 1 = "
                     f"{w.cutoff_len - 1:,}: LLaMA-Factory's pretraining drops a shorter tail, so nothing would "
                     "train (more text, or a smaller cutoff_len)")
    if steps is not None or w.max_steps > 0:
        n_steps = steps if steps is not None else w.max_steps
        samples = float(n_steps * w.global_batch)
        what = f"{n_steps} steps of {w.global_batch} {unit}" if steps is not None else \
            f"max_steps={n_steps} of {w.global_batch} {unit}"
        tokens = n_steps * w.grad_accum * w.world_size * real
    elif data is not None and data.rows is not None:
        rows = b.rows // w.sequences_per_sample if b is not None else data.rows  # DPO: pairs, not sequences
        per_epoch = max(math.ceil(rows / (w.micro_batch * w.world_size)) // w.grad_accum, 1)
        n_steps = math.ceil(w.epochs * per_epoch)
        samples = rows * w.epochs
        what = f"{w.epochs:g} epoch(s) of {','.join(data.names)} ({data.rows:,} rows" + (
            f" in {rows:,} packed rows of {w.cutoff_len}" if w.packing != "padded" and b is not None else "") + ")"
        tokens = (b.epoch_tokens if b is not None else rows * w.sequences_per_sample * w.cutoff_len) * w.epochs
    else:
        samples = tokens = 0.0
        n_steps = 0
        what = ""
        reason = "; ".join(data.notes) if data is not None and data.notes else "dataset size unknown"
        notes.append(f"no time estimate: {reason} (set max_steps, or STEPS= for a fixed number of steps)")
    if samples:
        secs = (tokens / (tps[1] * w.world_size), tokens / (tps[0] * w.world_size)) if tps is not None else (0.0, 0.0)
        time = TimeEstimate(n_steps, samples, tokens, secs, what, upper_bound=b is None)
    if tps is None:
        notes.insert(0, f"no known {w.precision} peak for {w.arch} {w.product}".rstrip()
                     + " in docker/arches.yaml: memory plan only, no throughput")
    return ThroughputPlan(flops, parts, w.peak_tflops, w.mfu, factors, tps, time, tuple(notes), host)
