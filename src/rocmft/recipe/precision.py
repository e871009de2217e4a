"""Training precision from the recipe and the arch table.

`auto` means bf16 where the arch has fast bf16 and fp32 where it does not. fp16 is never chosen for the
user: its 5-bit exponent overflows in attention logits and large activations (loss -> NaN), the failure
the posts spend half their length on. bf16 has fp32's range.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware.arches import Arch
from ..io.problems import Problem


@dataclass(frozen=True)
class Precision:
    name: str  # "bf16" | "fp16" | "fp32"
    reason: str

    @property
    def bf16(self) -> bool:
        return self.name == "bf16"

    @property
    def fp16(self) -> bool:
        return self.name == "fp16"


def resolve(requested: str, arch: Arch, file: str = "", use_cpu: bool = False) -> tuple[Precision, list[Problem]]:
    """`use_cpu`: LLaMA-Factory's `use_cpu: true` on a CPU arch, which lets transformers run bf16 there (autocast,
    emulated and slow) and fp16 (no autocast and no loss scaling on CPU: only weights stored in fp16 compute in
    it). For numerics checks (`make canary`), not for speed: a warning, not an error."""
    if use_cpu and not arch.is_gpu and requested in ("bf16", "fp16"):
        return Precision(requested, "requested, use_cpu"), [Problem(
            file, "precision", f"{requested} on a CPU with use_cpu: a numerics check, slow (no fast {requested} here)",
            "precision: fp32 for training on CPU", severity="warning")]
    if requested == "auto":
        if arch.bf16:
            return Precision("bf16", f"auto: {arch.name} has bf16"), []
        return Precision("fp32", f"auto: {arch.name} has no fast bf16, fp32 is the safe choice"), []
    if requested == "bf16" and not arch.bf16:
        return Precision("bf16", "requested"), [Problem(
            file, "precision", f"bf16 is not supported on {arch.name}",
            "use precision: fp32 (or auto); fp16 risks overflow")]
    if requested == "fp16" and arch.is_gpu:
        instead = "bf16 (same memory, fp32's range)" if arch.bf16 else "fp32"
        return Precision("fp16", "requested"), [Problem(
            file, "precision", "fp16 overflows easily in training (loss -> NaN, exploding grad norm)",
            f"use precision: {instead} on {arch.name}", severity="warning")]
    if requested == "fp16" and not arch.is_gpu:
        return Precision("fp16", "requested"), [Problem(
            file, "precision", "fp16 mixed precision needs a GPU", "use precision: fp32 on cpu")]
    return Precision(requested, "requested"), []
