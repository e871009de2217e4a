"""What on-the-fly quantization (`quantization_bit`, bitsandbytes) may be combined with: LLaMA-Factory's own
refusals, stated as it states them, and the arch images' bitsandbytes. Pure data: validation reports these, the
planner never suggests what they refuse. No torch.

LLaMA-Factory 0.9.5's rules (read in its source):
- hparams/parser.py `_verify_model_args`: quantization with a method other than LoRA/OFT; with `pissa_init`;
  with `resize_vocab`; `create_new_adapter` over an adapter; more than one adapter.
- hparams/parser.py `get_train_args`: `fp8` with quantization; `quantization_device_map: auto` when training.
- model/model_utils/quantization.py `configure_quantization`: bitsandbytes takes 4 or 8 bits; under DeepSpeed
  ZeRO-3 (or FSDP) only 4 bits (it then stores the 4-bit blocks in the compute dtype, bnb_4bit_quant_storage, so
  ZeRO-3 can shard them); HQQ and EETQ refuse ZeRO-3 outright.
- train/tuner.py `export_model`: no adapter is merged into a quantized model (rocmft's export merges into the
  unquantised base; cli/export.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# bitsandbytes#1856 ("Add blocksize=64 4-bit quantization support for ROCm CDNA (warp64) GPUs", merged 2026-02)
# first shipped in 0.49.2. Up to 0.49.1 the warp-64 (CDNA) build refuses 4-bit blocksize 64
# (backends/cuda/ops.py: `if ROCM_WARP_SIZE_64: blocksize in [4096, ..., 128]`) and quantizes on the fly with
# 128-value blocks instead (functional.py: `blocksize = 64 if not ROCM_WARP_SIZE_64 else 128`), so NF4
# checkpoints made elsewhere (64-value blocks) do not load; 0.49.2 has neither guard. Read in the PyPI wheels
# of 0.49.1 and 0.49.2.
CDNA_WARP64_FIX = "0.49.2"
CDNA_WARP64_PR = "bitsandbytes#1856"

# LLaMA-Factory 0.9.5's messages, verbatim.
LF_ONLY_LORA = "Quantization is only compatible with the LoRA or OFT method."
LF_ZERO3_4BIT = "Only 4-bit quantized model can use fsdp+qlora or auto device map."
LF_BNB_BITS = "Bitsandbytes only accepts 4-bit or 8-bit quantization."
LF_FP8 = "FP8 training is not compatible with quantization. Please disable one of them."
LF_DEVICE_MAP = "Cannot use device map for quantized models in training."
LF_PISSA = "Please use scripts/pissa_init.py to initialize PiSSA for a quantized model."
LF_RESIZE = "Cannot resize embedding layers of a quantized model."
LF_ZERO3_OTHER = "{method} quantization is incompatible with DeepSpeed ZeRO-3 or FSDP."


def _version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def cdna_bitsandbytes_too_old(family: str, version: str | None) -> bool:
    """A CDNA arch (64-wide waves) whose image's bitsandbytes predates the warp-64 4-bit fix."""
    return family.startswith("cdna") and bool(version) and _version(version or "") < _version(CDNA_WARP64_FIX)


def image_refusal(arch) -> str | None:
    """Why the arch's image cannot run bitsandbytes 4-bit, or None. Reads the arch table's package list."""
    version = getattr(arch, "image_packages", {}).get("bitsandbytes")
    if cdna_bitsandbytes_too_old(arch.family, version):
        return (f"the {arch.name} image's bitsandbytes {version} predates the warp-64 fix ({CDNA_WARP64_PR}, first "
                f"in {CDNA_WARP64_FIX}): on {arch.family.upper()}'s 64-wide waves it refuses NF4's 64-value blocks "
                "(128-value blocks instead; NF4 checkpoints made elsewhere do not load)")
    return None


@dataclass(frozen=True)
class Refusal:
    key: str
    message: str  # LLaMA-Factory's own words
    at_load: bool  # raised when the model loads, after preprocessing; its parser (what validation runs) never sees it


def lf_refusals(lf: Mapping[str, Any], zero3: bool) -> list[Refusal]:
    """Each quantization rule of LLaMA-Factory a training config breaks; [] without `quantization_bit`.
    `zero3`: the run uses DeepSpeed ZeRO-3."""
    bits = lf.get("quantization_bit")
    if bits is None:
        return []
    method = str(lf.get("quantization_method") or "bnb")
    out: list[Refusal] = []
    if str(lf.get("finetuning_type", "lora")) not in ("lora", "oft"):
        out.append(Refusal("finetuning_type", LF_ONLY_LORA, False))
    if lf.get("pissa_init"):
        out.append(Refusal("pissa_init", LF_PISSA, False))
    if lf.get("resize_vocab"):
        out.append(Refusal("resize_vocab", LF_RESIZE, False))
    if lf.get("fp8"):
        out.append(Refusal("fp8", LF_FP8, False))
    if lf.get("quantization_device_map") == "auto" and lf.get("do_train", True):
        out.append(Refusal("quantization_device_map", LF_DEVICE_MAP, False))
    if method == "bnb":
        if bits not in (4, 8):
            out.append(Refusal("quantization_bit", LF_BNB_BITS, True))
        elif zero3 and bits != 4:
            out.append(Refusal("quantization_bit", LF_ZERO3_4BIT, True))
    elif zero3 and method in ("hqq", "eetq"):
        out.append(Refusal("quantization_method", LF_ZERO3_OTHER.format(method=method.upper()), True))
    return out
