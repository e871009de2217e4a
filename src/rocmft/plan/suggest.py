"""What to change when a recipe does not fit (or what would make it faster): combinations, re-planned, ranked.

Each axis of a recipe the planner models offers a few moves (gradient checkpointing, DeepSpeed preset,
a smaller micro-batch with more accumulation at the same global batch, Liger kernels, lora_dropout 0, more
GPUs or nodes, a shorter cutoff_len, LoRA instead of full, 4-bit base weights). Every combination of up to
MAX_CHANGES axes is re-planned; what fits is kept, and a "tight" fit is kept visibly marked. A combination
is dropped when a simpler one is as cheap, as fast and fits as well. The rest are ranked by what they cost
(tier: 1 trains the same thing on the same hardware, 2 a mild change to the recipe, 3 more hardware - GPUs,
nodes or the host RAM CPU offload needs -, 4 a change to what is trained), then by how many changes of that
tier they need, then by modelled speed, fastest first. A run that already fits only hears of tier-1 changes that fit (not tight) and are faster.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..hardware import arches
from ..recipe import quantization, rules
from . import memory, throughput, workload
from .activations import LIGER_MODEL_TYPES
from .workload import Workload

MAX_SUGGESTIONS = 6
PER_TIER = {1: 3}  # at most this many of a tier before the others get a place (2 when not listed)
MAX_CHANGES = 4
FASTER_THAN = 1.02  # a run that fits is only told about changes at least 2% faster
TIER_TEXT = {1: "same training", 2: "mild recipe change", 3: "more hardware", 4: "changes what is trained"}
_VERDICT_RANK = {"fits": 0, "tight": 1}


@dataclass(frozen=True)
class Suggestion:
    text: str
    overrides: tuple[str, ...]
    speed: float  # per-GPU throughput relative to the recipe as it is (> 1: faster)
    spare_gib: float
    tier: int
    verdict: str  # fits | tight
    costs: tuple[str, ...] = ()
    changes: int = 1
    heavy: int = 1  # how many of its changes are of its own (highest) tier

    def line(self) -> str:
        sets = " ".join(self.overrides)
        fit = (f"fits, {self.spare_gib:.1f} GiB spare" if self.verdict == "fits" else
               f"TIGHT: {self.spare_gib:.1f} GiB spare, within the estimate's error")
        costs = "".join(f"; {c}" for c in self.costs)
        return f"{self.text}: {fit}, {speed_text(self.speed)}{costs}  [SET=\"{sets}\"]"


def speed_text(ratio: float) -> str:
    """Step-time change: ratio is throughput new/old. '~25% faster' = a quarter less time per token."""
    if ratio >= 1.5:
        return f"~{ratio:.1f}x faster"
    if ratio > FASTER_THAN:
        return f"~{(1 - 1 / ratio) * 100:.0f}% faster"
    if ratio >= 1 / FASTER_THAN:
        return "about the same speed"
    if ratio <= 1 / 1.5:
        return f"~{1 / ratio:.1f}x slower"
    return f"~{(1 / ratio - 1) * 100:.0f}% slower"


def size_text(gib: float) -> str:
    return f"~{gib / 1024:.1f} TiB" if gib >= 1024 else f"~{gib:.0f} GiB"


# ---------------------------------------------------------------- moves, one axis each

@dataclass(frozen=True)
class Move:
    axis: str
    tier: int
    apply: Callable[[Workload], Workload]


def _grow(w: Workload, gpus_per_node: int, nodes: int) -> Workload:
    """More GPUs, with fewer accumulation steps so the global batch stays the same when it divides."""
    total = w.global_batch
    new = replace(w, gpus_per_node=gpus_per_node, nodes=nodes)
    if total % (new.micro_batch * new.world_size) == 0:
        new = replace(new, grad_accum=total // (new.micro_batch * new.world_size))
    return new


def _pack(w: Workload) -> Workload:
    """neat_packing; with flash-attn LLaMA-Factory needs micro-batch 1, so the micro-batch is restated in tokens."""
    if w.attention == "fa2":
        return replace(w, packing="neat_packing", micro_batch=1, cutoff_len=w.micro_batch * w.cutoff_len)
    return replace(w, packing="neat_packing")


def _moves(w: Workload) -> list[Move]:
    out = [Move("checkpointing", 1, lambda x: replace(x, gradient_checkpointing=not x.gradient_checkpointing))]
    for preset in ("none", "zero2", "zero3", "zero3-replicated", "zero3-offload"):
        # an APU's CPU memory is its GPU memory: offloading frees nothing
        if preset != w.deepspeed and not (preset.endswith("offload") and w.unified_memory):
            out.append(Move("deepspeed", 3 if preset.endswith("offload") else 1,
                            lambda x, p=preset: workload.with_preset(x, p)))
    b, ga = w.micro_batch, w.grad_accum
    smaller = b // 2
    while smaller >= 1:
        if (b * ga) % smaller == 0:
            out.append(Move("micro-batch", 1, lambda x, s=smaller: replace(x, micro_batch=s, grad_accum=b * ga // s)))
        smaller //= 2
    if w.tokens_per_micro_batch < throughput.SMALL_MICRO_BATCH_TOKENS and ga % 2 == 0:
        out.append(Move("micro-batch", 1, lambda x: replace(x, micro_batch=b * 2, grad_accum=ga // 2)))
    # Never where rocmft.recipe.rules switches it off at render (ZeRO-3 + a trainable lm_head: linkedin/Liger-Kernel#1048).
    liger_z3_off = w.zero_stage == 3 and w.method == "full" and w.stage in rules.FLCE_STAGES
    if (not w.liger and w.liger_available and (w.model.model_type or "llama") in LIGER_MODEL_TYPES
            and not liger_z3_off):
        out.append(Move("liger", 1, lambda x: replace(x, liger=True, liger_asked=True)))
    # not for a model neat packing breaks or changes (workload._window_under_a_4d_mask): multimodal, or sliding
    # layers without flash-attn
    packable = not w.model.vision_params and (w.attention == "fa2" or not w.model.window)
    if w.packing == "padded" and w.stage == "sft" and w.lengths is not None and packable:
        out.append(Move("packing", 1, _pack))
    if w.evaluates and w.eval_batch > 1:  # the eval pass's full logits (evalpeak.py)
        out.append(Move("eval", 1, lambda x: replace(x, eval_batch=1)))
    if w.method == "lora" and w.lora_dropout > 0:
        out.append(Move("dropout", 2, lambda x: replace(x, lora_dropout=0.0)))
    arch = arches.table().get(w.arch)
    most = w.node_gpus if w.is_gpu else w.gpus_per_node
    if w.gpus_per_node < most:
        out.append(Move("hardware", 3, lambda x: _grow(x, most, x.nodes)))
    for factor in (2, 4):
        out.append(Move("hardware", 3, lambda x, f=factor: _grow(x, x.gpus_per_node, x.nodes * f)))
    if w.cutoff_len > 512:
        out.append(Move("cutoff", 4, lambda x: replace(x, cutoff_len=x.cutoff_len // 2)))
    if w.method == "full":
        out.append(Move("method", 4, lambda x: replace(x, method="lora", lora_rank=16, lora_dropout=0.0)))
    # QLoRA where the arch's image can run it (bitsandbytes there, and on CDNA one with the warp-64 fix)
    if w.method == "lora" and not w.quant_bits and (arch is None or (arch.bitsandbytes and not quantization.image_refusal(arch))):
        out.append(Move("quant", 4, lambda x: replace(x, quant_bits=4, double_quant=True)))
    return out


_ORDER = ("packing", "micro-batch", "eval", "checkpointing", "deepspeed", "liger", "dropout", "hardware", "cutoff", "method", "quant")


def _useless(w: Workload, new: Workload) -> bool:
    """Combinations that change nothing or plan something LLaMA-Factory would not run."""
    if new == w:
        return True
    if new.zero_stage in (1, 2, 3) and new.world_size == 1 and not new.offload:
        return True  # ZeRO shards over one GPU: nothing to split
    if new.packing == "neat_packing" and new.attention == "fa2" and new.micro_batch > 1:
        return True  # LLaMA-Factory's collator asserts micro-batch 1 for neat packing with flash-attn
    if new.quant_bits is not None:  # what LLaMA-Factory refuses (rocmft.recipe.quantization), in any combination
        lf = {"quantization_bit": new.quant_bits, "finetuning_type": new.method}
        return bool(quantization.lf_refusals(lf, zero3=new.zero_stage == 3))
    return False


# ---------------------------------------------------------------- describing a combination

def _describe(w: Workload, new: Workload, plan: memory.MemoryPlan) -> tuple[list[str], list[str], list[str]]:
    """(what changes, the SET= overrides, what it costs) from the difference between two workloads."""
    text: list[str] = []
    sets: list[str] = []
    costs: list[str] = []
    if new.packing != w.packing:
        text.append(f"neat packing ({new.micro_batch} x {new.cutoff_len}-token rows)")
        sets.append("neat_packing=true")
        slots = new.micro_batch * new.cutoff_len * new.grad_accum * new.world_size
        costs.append(f"samples packed end to end, none attending to another: {slots:,} tokens per step")
    if new.micro_batch != w.micro_batch:
        if new.packing == w.packing:
            text.append(f"micro-batch {new.micro_batch} x {new.grad_accum} accumulation")
        sets.append(f"per_device_train_batch_size={new.micro_batch}")
    if new.grad_accum != w.grad_accum:
        sets.append(f"gradient_accumulation_steps={new.grad_accum}")
    if new.eval_batch != w.eval_batch:
        text.append(f"eval micro-batch {new.eval_batch}")
        sets.append(f"per_device_eval_batch_size={new.eval_batch}")
        costs.append("more, smaller eval forwards")
    if new.gradient_checkpointing != w.gradient_checkpointing:
        on = new.gradient_checkpointing
        text.append(f"gradient checkpointing {'on' if on else 'off'}")
        sets.append(f"disable_gradient_checkpointing={'false' if on else 'true'}")
    if new.deepspeed != w.deepspeed:
        text.append({"none": "no DeepSpeed" + (" (no offload)" if w.offload else ""),
                     "zero2": "ZeRO-2", "zero3": "ZeRO-3" + (" without offload" if w.offload else ""),
                     "zero3-replicated": "ZeRO-3, no weight partitioned",
                     "zero3-offload": "ZeRO-3 with CPU offload"}.get(new.deepspeed, new.deepspeed))
        sets.append(f"deepspeed={new.deepspeed}")
    if w.offload and not new.offload:
        costs.append("offload is not needed")
    if new.offload and not w.offload:
        costs.append(f"host RAM {size_text(plan.host_gib_per_node)} per node for the offloaded states")
        if new.host_memory_gb and new.host_memory_gb < plan.host_gib_per_node * 1.1:
            costs.append(f"MORE than plan.host_memory_gb={new.host_memory_gb:g}")
    if new.liger != w.liger:
        text.append("Liger kernels")
        sets.append("enable_liger_kernel=true")
        costs.append("Liger kernels (in the ROCm image)")
    if new.lora_dropout != w.lora_dropout and new.method == w.method:
        text.append("lora_dropout 0")
        sets.append("lora_dropout=0")
        costs.append("no adapter dropout (LLaMA-Factory's default)")
    if new.gpus_per_node != w.gpus_per_node:
        text.append(f"{new.gpus_per_node} GPUs per node")
        sets.append(f"gpus_per_node={new.gpus_per_node}")
    if new.nodes != w.nodes:
        text.append(f"{new.nodes} nodes")
        sets.append(f"nodes={new.nodes}")
    if new.world_size != w.world_size:
        costs.append(f"{new.world_size} GPUs in all")
    if new.packing != w.packing:
        pass  # a packed row is not a sample: the tokens per step above say what a step holds
    elif new.global_batch != w.global_batch:
        costs.append(f"global batch {new.global_batch} (was {w.global_batch})")
    elif new.world_size != w.world_size or new.micro_batch != w.micro_batch:
        costs.append("same global batch")
    if new.cutoff_len != w.cutoff_len:
        sets.append(f"cutoff_len={new.cutoff_len}")
        if new.packing == w.packing:
            text.append(f"cutoff_len {new.cutoff_len}")
            costs.append("truncates longer samples")
    if new.method != w.method:
        text.append(f"LoRA r{new.lora_rank} on all linears instead of full fine-tuning")
        sets += ["finetuning_type=lora", f"lora_rank={new.lora_rank}", "lora_target=all", "lora_dropout=0"]
        costs.append("trains adapters, not every weight")
    if new.quant_bits != w.quant_bits:
        text.append("QLoRA: NF4 base weights (double-quantised scales)")
        sets += ["quantization_bit=4", "quantization_type=nf4", "double_quantization=true"]
        _, factor = throughput.quant_factor(new, throughput.flops_per_token(new)[0] + throughput.recompute_flops(new))
        costs.append(f"dequantisation ~{(1 / factor - 1) * 100:.0f}% of the step; the base is rounded to 4 bits "
                     "(export merges the adapter into the unquantised base)")
    return text, sets, costs


# ---------------------------------------------------------------- the search

def suggest(w: Workload, plan: memory.MemoryPlan) -> list[Suggestion]:
    found, _ = search(w, plan)
    return _pick(found)


def search(w: Workload, plan: memory.MemoryPlan) -> tuple[list[Suggestion], int]:
    """Every kept suggestion, ranked, and how many combinations were planned."""
    if plan.capacity_gib is None:
        return [], 0
    current_fits = plan.verdict == "fits"
    moves = [m for m in _moves(w) if not current_fits or m.tier == 1]
    by_axis: dict[str, list[Move]] = {}
    for m in moves:
        by_axis.setdefault(m.axis, []).append(m)
    axes = sorted(by_axis, key=_ORDER.index)
    seen: set[Workload] = set()
    kept: list[tuple[Suggestion, frozenset[str]]] = []
    tried = 0
    applied: dict[tuple[Move, ...], Workload] = {(): w}  # each prefix of moves applied once

    def apply(combo: tuple[Move, ...]) -> Workload:
        if combo not in applied:
            applied[combo] = combo[-1].apply(apply(combo[:-1]))
        return applied[combo]

    for n in range(1, min(MAX_CHANGES, len(axes)) + 1):
        for chosen in itertools.combinations(axes, n):
            for combo in itertools.product(*(by_axis[a] for a in chosen)):
                new = apply(combo)
                if new in seen or _useless(w, new):
                    continue
                seen.add(new)
                tried += 1
                result = _evaluate(w, new, combo, current_fits)
                if result is not None:
                    kept.append((result, frozenset(chosen)))
    ranked = _frontier(kept)
    ranked.sort(key=lambda s: (s.tier, _VERDICT_RANK[s.verdict], s.heavy if s.tier >= 3 else 0, -s.speed, s.changes))
    return ranked, tried


def _pick(ranked: list[Suggestion]) -> list[Suggestion]:
    """The first MAX_SUGGESTIONS, at most PER_TIER[tier] of each tier first, so a 4-bit or a shorter-cutoff
    fix on one card is not pushed out by ways to rent more hardware."""
    first = [s for i, s in enumerate(ranked) if sum(o.tier == s.tier for o in ranked[:i]) < PER_TIER.get(s.tier, 2)]
    rest = [s for s in ranked if s not in first]
    chosen = (first + rest)[:MAX_SUGGESTIONS]
    return sorted(chosen, key=ranked.index)


def _evaluate(w: Workload, new: Workload, combo: tuple[Move, ...], current_fits: bool) -> Suggestion | None:
    plan = memory.estimate(new)
    if plan.verdict not in ("fits", "tight") or (current_fits and plan.verdict != "fits"):
        return None
    speed = throughput.relative_speed(new, w)
    tier = max(m.tier for m in combo)
    if current_fits and (tier != 1 or speed <= FASTER_THAN):
        return None
    text, sets, costs = _describe(w, new, plan)
    return Suggestion(" + ".join(text), tuple(sets), speed, plan.spare_gib or 0.0, tier, plan.verdict,
                      tuple(costs), len(combo), sum(m.tier == tier for m in combo))


def _frontier(kept: list[tuple[Suggestion, frozenset[str]]]) -> list[Suggestion]:
    """Drop a combination when another changes a subset of its axes and is as cheap, as fast and fits as well."""
    out = []
    for s, axes in kept:
        dominated = any(
            other_axes < axes and o.tier <= s.tier and _VERDICT_RANK[o.verdict] <= _VERDICT_RANK[s.verdict]
            and o.speed >= s.speed * 0.99
            for o, other_axes in kept)
        if not dominated:
            out.append(s)
    return out
