"""Concrete changes to a recipe, each re-planned, kept only when it fits, ranked by expected speed cost.

Three tiers, in this order: changes that train the same thing (checkpointing, DeepSpeed preset, micro-batch
with the same global batch), then more hardware, then changes to what is trained (cutoff_len, method).
Within a tier the fastest comes first. A run that already fits only gets the changes that make it faster;
one that is tight or does not fit gets every change that makes it fit (a change that is itself only "tight"
is never suggested: that is how zero3-offload recipes never hear "drop offload" when ZeRO-3 alone is tight).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from .. import arches
from . import memory, throughput
from .workload import Workload

MAX_SUGGESTIONS = 5
FASTER_THAN = 1.02  # a run that fits is only told about changes at least 2% faster


@dataclass(frozen=True)
class Change:
    text: str
    overrides: tuple[str, ...]
    workload: Workload
    tier: int  # 1 same training, 2 more hardware, 3 changes what is trained
    note: str = ""


@dataclass(frozen=True)
class Suggestion:
    text: str
    overrides: tuple[str, ...]
    speed: float  # throughput relative to the recipe as it is (> 1: faster)
    spare_gib: float
    tier: int
    verdict: str

    def line(self) -> str:
        sets = " ".join(self.overrides)
        return f"{self.text}: fits with {self.spare_gib:.0f} GiB spare, {speed_text(self.speed)}  [SET=\"{sets}\"]"


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


_PRESET_TEXT = {
    "none": "no DeepSpeed (plain DDP)" , "zero2": "ZeRO-2", "zero3": "ZeRO-3 without offload",
    "zero3-offload": "ZeRO-3 with CPU offload",
}


def _changes(w: Workload) -> list[Change]:
    out: list[Change] = []
    if w.gradient_checkpointing:
        out.append(Change("turn off gradient checkpointing", ("disable_gradient_checkpointing=true",),
                          replace(w, gradient_checkpointing=False), 1))
    else:
        out.append(Change("turn on gradient checkpointing", ("disable_gradient_checkpointing=false",),
                          replace(w, gradient_checkpointing=True), 1))
    presets = ("none", "zero2", "zero3", "zero3-offload") if w.world_size > 1 else ("none", "zero3-offload")
    for preset in presets:
        if preset == w.deepspeed:
            continue
        text = _PRESET_TEXT[preset]
        note = ""
        if w.offload and not preset.endswith("offload"):
            text = {"none": "no DeepSpeed (plain DDP, no offload)", "zero2": "ZeRO-2 without offload"}.get(preset, text)
            note = "offload is not needed"
        out.append(Change(text, (f"deepspeed={preset}",), replace(w, deepspeed=preset), 1, note))
    b, ga = w.micro_batch, w.grad_accum
    smaller = b // 2
    while smaller >= 1:
        if (b * ga) % smaller == 0:
            new_ga = b * ga // smaller
            out.append(Change(f"micro-batch {smaller} x {new_ga} accumulation (same global batch)",
                              (f"per_device_train_batch_size={smaller}", f"gradient_accumulation_steps={new_ga}"),
                              replace(w, micro_batch=smaller, grad_accum=new_ga), 1))
        smaller //= 2
    if w.tokens_per_micro_batch < throughput.SMALL_MICRO_BATCH_TOKENS and ga % 2 == 0:
        out.append(Change(f"micro-batch {b * 2} x {ga // 2} accumulation (same global batch)",
                          (f"per_device_train_batch_size={b * 2}", f"gradient_accumulation_steps={ga // 2}"),
                          replace(w, micro_batch=b * 2, grad_accum=ga // 2), 1))
    most = arches.table()[w.arch].gpus_per_node if w.arch in arches.table() else w.gpus_per_node
    if w.gpus_per_node < most and w.zero_stage is not None and w.zero_stage >= 2:
        out.append(Change(f"shard over {most} GPUs per node", (f"gpus_per_node={most}",),
                          replace(w, gpus_per_node=most), 2))
    if w.cutoff_len > 512:
        half = w.cutoff_len // 2
        out.append(Change(f"cutoff_len {half} (truncates longer samples)", (f"cutoff_len={half}",),
                          replace(w, cutoff_len=half), 3))
    if w.method == "full":
        out.append(Change("LoRA instead of full fine-tuning (rank 16, all linears)",
                          ("finetuning_type=lora", "lora_rank=16", "lora_target=all"),
                          replace(w, method="lora", lora_rank=16), 3))
    if w.method == "lora" and not w.quant_bits:
        out.append(Change("QLoRA: 4-bit base weights", ("quantization_bit=4",), replace(w, quant_bits=4), 3))
    return out


def _combined(w: Workload, singles: list[Change]) -> list[Change]:
    same = [c for c in singles if c.tier == 1]
    pairs = []
    for a, b in itertools.combinations(same, 2):
        if {o.split("=")[0] for o in a.overrides} & {o.split("=")[0] for o in b.overrides}:
            continue
        merged = replace(b.workload, **{k: getattr(a.workload, k) for k in
                                        ("gradient_checkpointing", "deepspeed", "micro_batch", "grad_accum")
                                        if getattr(a.workload, k) != getattr(w, k)})
        pairs.append(Change(f"{a.text} and {b.text}", a.overrides + b.overrides, merged, 1,
                            a.note or b.note))
    return pairs


def suggest(w: Workload, plan: memory.MemoryPlan) -> list[Suggestion]:
    if plan.capacity_gib is None:
        return []
    current_fits = plan.verdict == "fits"
    singles = _changes(w)
    found = _evaluate(w, singles, current_fits)
    if not current_fits and not any(s.tier == 1 for s in found):
        found += _evaluate(w, _combined(w, singles), current_fits)
    found.sort(key=lambda s: (s.tier, -s.speed))
    return found[:MAX_SUGGESTIONS]


def _evaluate(w: Workload, changes: list[Change], current_fits: bool) -> list[Suggestion]:
    found = []
    for change in changes:
        plan = memory.estimate(change.workload)
        if plan.verdict != "fits":
            continue
        speed = throughput.relative_speed(change.workload, w)
        if current_fits and (change.tier != 1 or speed <= FASTER_THAN):
            continue
        text = change.text + (f" - {change.note}" if change.note else "")
        found.append(Suggestion(text, change.overrides, speed, plan.spare_gib or 0.0, change.tier, plan.verdict))
    return found
