"""`quantization_bit` against what the target can run, before anything loads: the arch image's bitsandbytes (a
CDNA image needs the warp-64 fix) and LLaMA-Factory's rules that it only applies when the model loads (after
preprocessing, minutes into a run), in its own words. The rules themselves: rocmft.recipe.quantization."""

from __future__ import annotations

import json
from typing import Any

from ..io.problems import Problem
from ..recipe import quantization

FIXES = {
    "quantization_bit": "quantization_bit=4 (bitsandbytes NF4 shards under ZeRO-3), or deepspeed=none",
    "quantization_method": "quantization_method=bnb with quantization_bit=4, or deepspeed=none",
}


def zero3(ds_config: str | None) -> bool:
    if not ds_config:
        return False
    try:
        return int((json.loads(ds_config).get("zero_optimization") or {}).get("stage", 0)) == 3
    except (ValueError, TypeError, AttributeError):
        return False  # DeepSpeed's own config check reports a malformed file


def check(args: dict[str, Any], ds_config: str | None, arch, file: str) -> list[Problem]:
    if args.get("quantization_bit") is None:
        return []
    problems = []
    if arch is not None and str(args.get("quantization_method") or "bnb") == "bnb":
        why = quantization.image_refusal(arch)
        if why:
            problems.append(Problem(file, "quantization_bit", why,
                                    f"pin bitsandbytes >= {quantization.CDNA_WARP64_FIX} (hardware/versions.py), then "
                                    f"`make image ARCH={arch.name}`"))
    for refusal in quantization.lf_refusals(args, zero3(ds_config)):
        if refusal.at_load:
            problems.append(Problem(file, refusal.key, f'LLaMA-Factory refuses it when the model loads: "{refusal.message}"',
                                    FIXES.get(refusal.key, "")))
    return problems
