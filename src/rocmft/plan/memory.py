"""GPU memory per GPU for a fine-tuning workload, as named components (GiB), and a verdict.

All sizes are GiB (2**30 bytes). GPU memory is sold in binary units: a "24 GB" RX 7900 XTX holds 24 GiB,
a "192 GB" MI300X 192 GiB; the arch table's gpu_memory_gb is read as GiB.

The model (sources next to each constant):
- Bytes per parameter by regime, from the ZeRO paper (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
  Toward Training Trillion Parameter Models", sec. 3.1: mixed-precision Adam keeps 2 (16-bit weights) +
  2 (16-bit gradients) + 12 (fp32 master, momentum, variance) = 16 bytes per parameter) and from what
  LLaMA-Factory 0.9.5 does (llamafactory/model/adapter.py init_adapter): without DeepSpeed ZeRO-3, trainable
  parameters are upcast to fp32 and trained under torch autocast (fp32 weights 4 + fp32 grads 4 + Adam 8, and
  autocast's bf16 weight copies 2: the README's "18x GB" full fine-tune row); `pure_bf16` keeps weights,
  gradients and Adam states in bf16 (2+2+4: its "8x GB" row).
- ZeRO partitioning (same paper, fig. 1): stage 1 splits optimizer states (+ fp32 master), stage 2 also
  gradients, stage 3 also weights, over every GPU of every node. zero3-offload keeps all of them in host RAM.
- Quantised base weights (`quantization_bit`): quant.py, tensor by tensor - NF4 codes, their block scales
  (blocksize 64; double quantisation: 8-bit absmax per block + an fp32 one per 256 blocks, the QLoRA paper's
  0.127 bits per weight), LLM.int8 rows; embeddings, lm_head, norms and biases in the compute dtype; and the
  largest quantised layer dequantised to the compute dtype during forward and backward.
- Activations and logits: activations.py (per layer, LoRA adapter inputs on a GPU or a CPU, logits).
- Optimizer step: torch's foreach AdamW (torch/optim/adamw.py _multi_tensor_adamw) allocates one fp32
  temporary per parameter (sqrt of the variance). DeepSpeed's bf16 ZeRO-1/2 optimizers convert the whole
  gradient partition to fp32 for the step (8 bytes per parameter with AdamW's temporary). ZeRO-3 steps one
  sub-group at a time (deepspeed/runtime/zero/stage3.py: step() calls _prepare_sub_group ->
  _prepare_fp32_grad_for_sub_group, which makes the sub-group's fp32 gradient, then _optimizer_step and
  _release_sub_group, which frees it): its temporaries are 8 bytes per element of one sub-group, at most
  min(partition, sub_group_size + the largest parameter's partition) (_create_fp16_sub_groups closes a
  sub-group at the first parameter that takes it to sub_group_size; 1e9 by default and in ds_configs/).
  This peak comes after backward, so it is counted against the activations (max of the two), not on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import activations as act
from . import evalpeak, quant, zero3
from .workload import Workload

GIB = act.GIB

# Verdict thresholds on total / capacity. The components already include a runtime reserve, so "tight" means
# the estimate's own error (about +-20%, see the tests against LLaMA-Factory's table) could make it not fit.
FITS_BELOW = 0.90
TIGHT_UP_TO = 1.00

# Runtime reserve: the HIP context, loaded kernels and the rocBLAS/hipBLASLt workspace take ~1 GiB per process
# before any tensor (what torch.cuda.mem_get_info shows missing right after init on MI300X and RX 7900 XTX);
# RCCL's channels and buffers add ~0.5 GiB per rank in multi-GPU runs; the caching allocator's fragmentation
# is taken as 5% of everything allocated.
RESERVE_CONTEXT_GIB = 1.0
RESERVE_RCCL_GIB = 0.5
FRAGMENTATION = 0.05
OVERLAP_BUCKETS = 4.5  # ZeRO-1/2 buffers with overlap_comm, per bucket element (see estimate)



@dataclass(frozen=True)
class Component:
    key: str  # stable id: weights, trainable, gradients, optimizer, master, buffers, autocast, dequant, activations, logits, step, reserve
    label: str
    gib: float
    phase: str  # "persistent" | "fwd_bwd" (forward/backward) | "step" (optimizer step) | "reserve"


@dataclass(frozen=True)
class MemoryPlan:
    components: tuple[Component, ...]
    total_gib: float
    capacity_gib: float | None
    peak_phase: str  # "forward/backward" | "optimizer step"
    host_gib_per_node: float  # host RAM the offloaded states need on each node (0 without offload)
    trainable_params: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    eval_gib: float | None = None  # the peak of an evaluation pass (evalpeak.py); None when the run does not evaluate
    eval_label: str = ""

    @property
    def peak_gib(self) -> float:
        """The larger of the training peak and the evaluation peak: what the card must hold."""
        return max(self.total_gib, self.eval_gib or 0.0)

    @property
    def fraction(self) -> float | None:
        return self.peak_gib / self.capacity_gib if self.capacity_gib else None

    @property
    def spare_gib(self) -> float | None:
        return self.capacity_gib - self.peak_gib if self.capacity_gib else None

    @property
    def verdict(self) -> str:
        f = self.fraction
        if f is None:
            return "unknown"
        if f < FITS_BELOW:
            return "fits"
        return "tight" if f <= TIGHT_UP_TO else "does not fit"

    def gib(self, key: str) -> float:
        return sum(c.gib for c in self.components if c.key == key)


# ---------------------------------------------------------------- parameter counts

@dataclass(frozen=True)
class ParamCounts:
    trainable: int
    frozen_linear: int  # frozen decoder-layer linear weights (what quantization applies to)
    frozen_other: int  # frozen embeddings, lm_head, norms (and linears of frozen layers when not quantized)


def param_counts(w: Workload) -> ParamCounts:
    m = w.model
    total = m.total_params
    extras = 0
    if "embed_tokens" in w.extra_trainable:
        extras += m.embed_params
    if "lm_head" in w.extra_trainable and not m.tie_word_embeddings:
        extras += m.head_params
    if w.method == "full":
        return ParamCounts(total, 0, 0)
    if w.method == "freeze":
        trainable = abs(w.freeze_layers) * m.layer_params + extras
        return ParamCounts(min(trainable, total), 0, max(total - trainable, 0))
    lora = m.lora_params(w.lora_targets, w.lora_rank)
    frozen_linear = m.linear_params  # MoE: the routed experts are no nn.Linear (architecture.py): frozen_other
    return ParamCounts(lora + extras, frozen_linear, total - frozen_linear - extras)


def largest_trainable(w: Workload) -> int:
    """Elements of the largest trainable parameter (where a ZeRO-3 sub-group may overshoot sub_group_size)."""
    m = w.model
    if w.method == "lora":
        biggest = max((max(x.in_features, x.out_features) for x in m.of(w.lora_targets)), default=0) * w.lora_rank
    else:
        biggest = m.largest_layer_param
        if w.method == "full" or w.extra_trainable:
            biggest = max(biggest, m.vocab_size * m.hidden_size)
    if w.extra_trainable:
        biggest = max(biggest, m.vocab_size * m.hidden_size)
    return biggest


def lora_params(w: Workload) -> int:
    return param_counts(w).trainable if w.method == "lora" else 0


# ---------------------------------------------------------------- bytes per parameter

@dataclass(frozen=True)
class Regime:
    name: str
    weight: float  # trainable weights
    grad: float
    optim: float
    master: float
    autocast: float  # bf16 copies of fp32 trainable weights held by autocast (forward/backward)
    step: float  # optimizer-step temporaries


def regime(w: Workload) -> Regime:
    half = w.precision in ("bf16", "fp16")
    if not half:
        r = Regime("fp32", 4, 4, 8, 0, 0, 4)
    elif w.zero_stage is not None:
        # DeepSpeed bf16/fp16: 16-bit weights and gradients, fp32 master + Adam (ZeRO paper: 2+2+12); the step
        # converts the gradient partition to fp32 (4) and AdamW's foreach temporary adds 4.
        r = Regime("DeepSpeed mixed precision", 2, 2, 8, 4, 0, 8)
    elif w.pure_bf16:
        r = Regime("pure bf16", 2, 2, 4, 0, 0, 2)
    else:
        # torch AMP: LLaMA-Factory upcasts trainable parameters to fp32 (adapter.py), autocast casts them per op.
        r = Regime("fp32 trainable params + autocast", 4, 4, 8, 0, 2, 4)
    optim = w.optim.lower()
    if "8bit" in optim:
        r = Regime(r.name, r.weight, r.grad, 2, r.master, r.autocast, 0)  # bitsandbytes: 1 byte per Adam state, fused step
    elif "adafactor" in optim:
        r = Regime(r.name, r.weight, r.grad, 0.1, r.master, r.autocast, r.step)  # factored second moment, no momentum
    elif optim.startswith("sgd"):
        r = Regime(r.name, r.weight, r.grad, 4 if r.optim == 8 else 2, r.master, r.autocast, r.step)
    return r


def compute_bytes(w: Workload) -> float:
    return 2.0 if w.precision in ("bf16", "fp16") else 4.0


def quantised(w: Workload) -> bool:
    return bool(w.quant_bits) and w.method == "lora"


def frozen_weight_bytes(w: Workload, counts: ParamCounts) -> tuple[float, float]:
    """(bytes of the frozen decoder linears, bytes of the other frozen parameters). Quantised: each linear weight
    as quant.py stores it, its bias in the compute dtype."""
    compute = compute_bytes(w)
    if not quantised(w) or not counts.frozen_linear:
        return counts.frozen_linear * compute, counts.frozen_other * compute
    m = w.model
    weights = sum(x.layers * x.in_features * x.out_features for x in m.linears)
    packed = sum(x.layers * quant.quantised_bytes([(x.in_features, x.out_features)], w.quant_bits or 4, w.double_quant)
                 for x in m.linears)
    return packed + (counts.frozen_linear - weights) * compute, counts.frozen_other * compute


def dequant_buffer_bytes(w: Workload) -> float:
    """The largest quantised weight dequantised to the compute dtype (alive during its matmul, forward and backward)."""
    if not quantised(w):
        return 0.0
    biggest = w.model.largest_linear()
    return biggest.in_features * biggest.out_features * compute_bytes(w)


# ---------------------------------------------------------------- the plan

def _zero3_share(w: Workload) -> tuple[dict[str, str], dict[str, float]]:
    """(label, fraction held per GPU) of the frozen, trainable and all weights: 1 without ZeRO-3; under it 1/N, but
    whole for what stage3_param_persistence_threshold keeps resident (zero3.py)."""
    if w.zero_stage != 3:
        return {k: "" for k in ("frozen", "trainable", "all")}, {k: 1.0 for k in ("frozen", "trainable", "all")}
    W = w.world_size
    params = zero3.parameters(w)
    totals = {"frozen": sum(n for n, t in params if not t), "trainable": sum(n for n, t in params if t)}
    frozen, trainable = zero3.resident(w)
    whole = {"frozen": frozen, "trainable": trainable}
    totals["all"], whole["all"] = totals["frozen"] + totals["trainable"], frozen + trainable
    labels, shares = {}, {}
    for key in totals:
        f = whole[key] / totals[key] if totals[key] else 0.0
        shares[key] = f + (1 - f) / W
        labels[key] = (f", 1/{W} (ZeRO-3)" if f == 0 else ", whole: ZeRO-3 persistence threshold" if f == 1 else
                       f", 1/{W} (ZeRO-3), {_fmt_params(whole[key])} whole")
    return labels, shares


def _reference(w: Workload, b16: int, part3: int) -> list[Component]:
    """What preference training holds beside the policy: a frozen copy of the model as DPO's or KTO's
    reference when the policy is not a LoRA adapter (LLaMA-Factory's create_ref_model loads one in the compute
    dtype; TRL's prepare_deepspeed shards it like the policy under ZeRO-3 and keeps it whole otherwise),
    and the logits of the forwards without gradients (activations.reference_logits_gib)."""
    out = []
    if w.reference == "copy" and not w.offload_params:  # with offload_param its weights stream in as the policy's
        out.append(Component("reference", f"reference model (a frozen copy, {w.precision}{', 1/' + str(part3) if part3 > 1 else ''})",
                             w.model.total_params * b16 / part3 / GIB, "persistent"))
    if w.extra_forwards:
        what = "the reference's" if w.stage == "dpo" else "the KL estimate's and the reference's"
        out.append(Component("reference_logits", f"{what} logits, no gradients (while the policy's are held)",
                             act.reference_logits_gib(w), "fwd_bwd"))
    return out


def _fmt_params(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f} B"
    if n >= 1e6:
        return f"{n / 1e6:.1f} M"
    return f"{n / 1e3:.1f} k"


def estimate(w: Workload) -> MemoryPlan:
    m = w.model
    counts = param_counts(w)
    r = regime(w)
    W = w.world_size
    stage = w.zero_stage
    offload = w.offload
    frozen_lin, frozen_oth = frozen_weight_bytes(w, counts)
    part3 = W if stage == 3 else 1  # weights
    part2 = W if stage is not None and stage >= 2 else 1  # gradients
    part1 = W if stage is not None and stage >= 1 else 1  # optimizer states, master weights, step temporaries
    shard = lambda p: "" if p == 1 else f", 1/{p} (ZeRO-{stage})"
    kept, per_gpu = _zero3_share(w)
    comps: list[Component] = []
    notes: list[str] = []

    what = {"lora": f"LoRA r{w.lora_rank} on {','.join(w.lora_targets)}", "full": "all parameters",
            "freeze": f"last {w.freeze_layers} layers" if w.freeze_layers > 0 else f"first {-w.freeze_layers} layers"}[w.method]
    if w.extra_trainable:
        what += " + " + ",".join(w.extra_trainable)
    frozen_n = counts.frozen_linear + counts.frozen_other
    if offload:
        held = (f"weights ({_fmt_params(m.total_params)}), " if w.offload_params else "") + "fp32 gradients, Adam states, fp32 master"
        comps.append(Component("offloaded", f"{held}: in host RAM ({w.deepspeed})", 0.0, "persistent"))
        if w.offload_params:
            notes.append("zero3-offload: the GPU holds only the layers being computed (gathered weights) and activations")
        if w.unified_memory:
            notes.append(f"{w.product}: CPU and GPU share one memory, so the offloaded states (host RAM below) come "
                         "out of the same GPU memory")
    if offload and not w.offload_params:
        # the 16-bit weights stay on the GPUs, sharded (ZeRO-3): frozen and trainable alike
        comps.append(Component("weights", f"16-bit weights ({_fmt_params(m.total_params)} params{kept['all']})",
                               (frozen_lin + frozen_oth + counts.trainable * 2) * per_gpu["all"] / GIB, "persistent"))
    elif not offload:
        if frozen_n:
            dtype = w.precision
            if quantised(w):
                kind = ("NF4 + double-quantised scales" if w.double_quant else "NF4 + fp32 scales") if w.quant_bits == 4 \
                    else "LLM.int8 + row scales" if w.quant_bits == 8 else f"{w.quant_bits}-bit"
                dtype = (f"{_fmt_params(counts.frozen_linear)} linear {kind} {frozen_lin / GIB:.2f} GiB"
                         f" ({8 * frozen_lin / counts.frozen_linear:.3f} bits each), embeddings/lm_head/norms "
                         f"{w.precision} {frozen_oth / GIB:.2f} GiB")
            comps.append(Component("weights", f"frozen weights ({_fmt_params(frozen_n)} params, {dtype}{kept['frozen']})",
                                   (frozen_lin + frozen_oth) * per_gpu["frozen"] / GIB, "persistent"))
        wbytes = "fp32" if r.weight == 4 else "16-bit"
        comps.append(Component("trainable", f"trainable weights ({_fmt_params(counts.trainable)}: {what}; {wbytes}"
                               f"{kept['trainable']})", counts.trainable * r.weight * per_gpu["trainable"] / GIB, "persistent"))
        comps.append(Component("gradients", f"gradients ({'fp32' if r.grad == 4 else '16-bit'}{shard(part2)})",
                               counts.trainable * r.grad / part2 / GIB, "persistent"))
        opt_name = "AdamW m+v " + ("bf16" if r.optim == 4 else "fp32" if r.optim == 8 else w.optim)
        comps.append(Component("optimizer", f"optimizer states ({opt_name}{shard(part1)})",
                               counts.trainable * r.optim / part1 / GIB, "persistent"))
        if r.master:
            comps.append(Component("master", f"fp32 master weights{shard(part1)}",
                                   counts.trainable * r.master / part1 / GIB, "persistent"))

    # DeepSpeed / DDP buffers
    b16 = 2 if w.precision != "fp32" else 4
    if stage == 3:
        # gathered for a module's forward or backward, at most stage3_max_live_parameters of what is partitioned
        live = min(w.ds_live_params, zero3.partitioned(w)) * b16
        if m.experts is not None and m.experts.leaf:  # LLaMA-Factory's ZeRO-3 leaf: a MoE block is gathered whole
            live = max(live, m.experts.block_params * b16)
        grads = max(m.layer_params, m.vocab_size * m.hidden_size) * r.grad if w.method != "lora" else 0
        # the reduce bucket (reduce_bucket_size, "auto" = h^2), doubled with overlap_comm (stage3.py ipg buffers)
        bucket = min(w.ds_reduce_bucket or m.hidden_size ** 2, counts.trainable) * b16 * (2 if w.ds_overlap_comm else 1)
        comps.append(Component("buffers", (f"ZeRO-3 gathered weights (stage3_max_live_parameters={w.ds_live_params:.0e}), "
                                           if live else "")
                               + ("grads of the largest module, " if grads else "")
                               + f"reduce bucket{' x2 (overlap_comm)' if w.ds_overlap_comm else ''}",
                               (live + grads + bucket) / GIB, "fwd_bwd"))
    elif stage is not None:
        reduce = min(w.ds_reduce_bucket or m.hidden_size ** 2, counts.trainable)
        if w.ds_overlap_comm:
            # "overlap_comm uses 4.5x the allgather_bucket_size and reduce_bucket_size values"
            # (https://huggingface.co/docs/transformers/deepspeed, ZeRO-2)
            gather = min(w.ds_allgather_bucket or 5e8, counts.trainable)
            size, label = OVERLAP_BUCKETS * (reduce + gather) * b16, "4.5 x (reduce + allgather), overlap_comm"
        else:
            size, label = reduce * r.grad, f"reduce_bucket_size={reduce:.0e}"
        comps.append(Component("buffers", f"DeepSpeed gradient buckets ({label})", size / GIB, "persistent"))
    elif W > 1:
        comps.append(Component("buffers", "DDP gradient buckets (a second copy of the gradients)",
                               counts.trainable * r.grad / GIB, "persistent"))

    if r.autocast:
        comps.append(Component("autocast", "autocast bf16 copies of the fp32 trainable weights",
                               counts.trainable * r.autocast / GIB, "fwd_bwd"))
    if quantised(w):
        biggest = w.model.largest_linear()
        comps.append(Component("dequant", f"the largest quantised layer dequantised to {w.precision} ({biggest.name}, "
                               f"{biggest.in_features:,} x {biggest.out_features:,}) for its matmul",
                               dequant_buffer_bytes(w) / GIB, "fwd_bwd"))
    gc = "gradient checkpointing" if w.gradient_checkpointing else "no gradient checkpointing"
    attn = "fused attention" if act.fused_attention(w) else "eager attention: seq^2 scores"
    extra = ", Liger norms/SwiGLU" if act.liger_applies(w) else ""
    batch = (f"{w.micro_batch} pair{'s' if w.micro_batch > 1 else ''} = {w.micro_batch * 2} sequences"
             if w.sequences_per_sample > 1 else str(w.micro_batch))
    swap = act.zero3_linear_bytes(w)
    comps.append(Component("activations", f"activations ({batch} x {w.cutoff_len} tokens, {gc}, {attn}{extra}"
                           + (", ZeRO-3 linear swap" if swap else "") + ")", act.activations_gib(w), "fwd_bwd"))
    if swap:
        notes.append(f"ZeRO-3's linear swap (memory_efficient_linear: true, DeepSpeed's default) keeps the frozen "
                     f"projections' inputs: {act.layer_tokens_gib(w, swap):.1f} GiB of the activations "
                     "(memory_efficient_linear: false drops them, as zero3-replicated does)")
    if w.packing == "neat_packing" and w.attention != "fa2":
        # SFTDataCollatorWith4DAttentionMask: a (b, 1, s, s) block-diagonal mask in the compute dtype (SDPA/eager)
        comps.append(Component("mask", f"neat_packing's 4D attention mask ({w.micro_batch} x {w.cutoff_len}^2)",
                               w.micro_batch * w.cutoff_len ** 2 * act.act_bytes(w) / GIB, "fwd_bwd"))
    if w.method == "lora" and w.lora_targets:
        dropout = (f"dropout {w.lora_dropout:g}: " + ("fused, a 1-byte mask" if w.is_gpu else "unfused, a noise tensor")
                   + " + lora_A's copy of its input") if w.lora_dropout > 0 else "no dropout"
        notes.append(f"LoRA activations modelled as on a {act.lora_device(w)} ({dropout}; included above)")
    chunked = act.fused_loss(w)
    seqs = f"{w.micro_batch * w.sequences_per_sample} sequences: chosen + rejected, " if w.sequences_per_sample > 1 else ""
    comps.append(Component("logits", f"logits + loss ({seqs}{m.vocab_size:,} vocab, "
                           + ("Liger fused linear cross-entropy, chunked" if chunked else "fp32") + ")",
                           act.logits_gib(w), "fwd_bwd"))
    comps += _reference(w, b16, part3)
    step_elems = 0.0 if offload else counts.trainable / part1
    step_label = "optimizer-step temporaries (fp32 grads/AdamW; after backward, not with activations)"
    if stage == 3 and step_elems > w.ds_sub_group_size:
        step_elems = min(step_elems, w.ds_sub_group_size + largest_trainable(w) / W)
        step_label = (f"optimizer-step temporaries for one ZeRO-3 sub-group at a time (sub_group_size="
                      f"{w.ds_sub_group_size:.0e}: fp32 grads + AdamW; after backward)")
    step = step_elems * r.step / GIB
    if step:
        comps.append(Component("step", step_label, step, "step"))

    persistent = sum(c.gib for c in comps if c.phase == "persistent")
    fwd = sum(c.gib for c in comps if c.phase == "fwd_bwd")
    stp = sum(c.gib for c in comps if c.phase == "step")
    peak_phase = "forward/backward" if fwd >= stp else "optimizer step"
    used = persistent + max(fwd, stp)
    if w.is_gpu:
        reserve = RESERVE_CONTEXT_GIB + (RESERVE_RCCL_GIB if W > 1 else 0.0) + FRAGMENTATION * used
        label = "runtime reserve (HIP context, " + ("RCCL, " if W > 1 else "") + f"{FRAGMENTATION:.0%} allocator fragmentation)"
    else:
        reserve = FRAGMENTATION * used
        label = f"allocator reserve ({FRAGMENTATION:.0%})"
    comps.append(Component("reserve", label, reserve, "reserve"))
    eval_gib, eval_label = None, ""
    if w.evaluates:
        held = persistent + sum(c.gib for c in comps if c.key in ("buffers", "dequant", "autocast") and c.phase == "fwd_bwd")
        extra, eval_label = evalpeak.transient_gib(w)
        eval_used = held + extra
        eval_gib = eval_used + reserve - FRAGMENTATION * (used - eval_used)
    host = 0.0
    if offload:
        # fp32 master + Adam + fp32 gradient partitions; with offload_param the 16-bit weights too
        per_rank = ((frozen_lin + frozen_oth if w.offload_params else 0)
                    + counts.trainable * ((r.weight if w.offload_params else 0) + r.master + r.optim + 4)) / W
        host = per_rank * w.gpus_per_node / GIB
    return MemoryPlan(
        components=tuple(comps), total_gib=used + reserve, capacity_gib=w.capacity_gib, peak_phase=peak_phase,
        host_gib_per_node=host, trainable_params=counts.trainable, notes=tuple(notes), eval_gib=eval_gib,
        eval_label=eval_label,
    )
