"""Combinations of settings that a source says break on the GPU, checked at render.

Each rule names its source. It either makes the rendered file valid by construction (the value it renders
instead is printed as a note and written as a comment at the top of train.yaml) or refuses the recipe with
the reason (an error, exit 2). None of these combinations fails on the CPU that CI trains on (SDPA, no Liger,
no sharded lm_head), so nothing but these rules stands between them and a first GPU run that dies.

A rule is lifted when a GPU run shows the combination works: say which run in the commit that lifts it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..io.problems import Problem

# HF TrainingArguments' defaults, which apply when the rendered file leaves a batch size out.
HF_TRAIN_BATCH = 8
HF_EVAL_BATCH = 8


@dataclass(frozen=True)
class Rule:
    name: str
    source: str  # what shows the combination breaks: a file and line of a library, an issue
    apply: Callable[[dict[str, Any], int, str], list[Problem]]  # (args, ZeRO stage, file) -> problems; may edit args


def zero_stage(ds_config: str | None) -> int:
    """The ZeRO stage of a rendered DeepSpeed JSON (0 without DeepSpeed)."""
    if not ds_config:
        return 0
    try:
        return int(json.loads(ds_config).get("zero_optimization", {}).get("stage", 0) or 0)
    except (ValueError, TypeError, AttributeError):
        return 0


# ---------------------------------------------------------------- neat packing + flash-attn 2: micro-batch 1

NEAT_FA2_SOURCE = ("LLaMA-Factory 0.9.5 data/collator.py, SFTDataCollatorWith4DAttentionMask: under neat_packing + "
                   "flash_attention_2 it asserts `bsz should be 1 for neat packing`, eval batches too")


def _neat_packing_fa2(args: dict[str, Any], _stage: int, file: str) -> list[Problem]:
    # fa2 is what renders flash_attention_2 (LLaMA-Factory model_utils/attention.py); `auto` leaves transformers'
    # default, SDPA, which builds a 4D block-diagonal mask instead and takes any batch.
    if not args.get("neat_packing") or args.get("flash_attn") != "fa2" or args.get("stage", "sft") != "sft":
        return []
    problems = []
    train = args.get("per_device_train_batch_size", HF_TRAIN_BATCH)
    if train != 1:
        problems.append(Problem(
            file, "llamafactory.per_device_train_batch_size",
            f"{train} with neat_packing and flash-attn 2 stops the first step: `bsz should be 1 for neat packing` "
            "(LLaMA-Factory 0.9.5 data/collator.py, SFTDataCollatorWith4DAttentionMask)",
            "per_device_train_batch_size: 1 - a packed row of cutoff_len tokens is the micro-batch; raise "
            "cutoff_len or gradient_accumulation_steps for more tokens per step (or flash_attn: sdpa)"))
    evaluates = args.get("val_size") or args.get("eval_dataset")
    if evaluates and args.get("per_device_eval_batch_size", HF_EVAL_BATCH) != 1:
        before = args.get("per_device_eval_batch_size", HF_EVAL_BATCH)
        args["per_device_eval_batch_size"] = 1
        problems.append(Problem(
            file, "llamafactory.per_device_eval_batch_size",
            f"rendered 1, not {before}: the first evaluation would stop the run ({NEAT_FA2_SOURCE}). "
            "Cost: eval forwards one packed row at a time (a row holds several samples, so fewer calls than rows)",
            severity="note"))
    return problems


# ---------------------------------------------------------------- Liger's fused linear cross-entropy + ZeRO-3

LIGER_Z3_SOURCE = ("linkedin/Liger-Kernel#1048 (open): Liger reads lm_head.weight by attribute, so under ZeRO-3 "
                   "a trainable lm_head's gradient lands on a re-partitioned, 0-element parameter - \"The size of "
                   "tensor a (0) must match the size of tensor b (4096)\"; TRL fixed the same bug in its own losses "
                   "(huggingface/trl#5891, #6372), LLaMA-Factory 0.9.5's Liger patch has no such fix")
# LLaMA-Factory applies the fused linear cross-entropy only where the loss needs no logits (model/loader.py:
# require_logits=(stage not in ["pt", "sft"]); DPO and KTO keep Liger's other kernels only).
FLCE_STAGES = ("sft", "pt")


def _listed(value: Any) -> list[str]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def lm_head_trainable(args: dict[str, Any]) -> bool:
    kind = args.get("finetuning_type", "lora")  # LLaMA-Factory's default
    if kind == "full":
        return True
    if kind == "freeze":
        return "lm_head" in _listed(args.get("freeze_extra_modules"))
    # LoRA: lm_head is frozen unless `additional_target` trains a full copy of it (PEFT's modules_to_save)
    return "lm_head" in _listed(args.get("additional_target"))


def _liger_zero3_lm_head(args: dict[str, Any], stage: int, file: str) -> list[Problem]:
    if not args.get("enable_liger_kernel") or stage != 3 or args.get("stage", "sft") not in FLCE_STAGES:
        return []
    if not lm_head_trainable(args):
        return []
    # LLaMA-Factory switches Liger on or off as a whole: its other kernels (RMSNorm, RoPE, SwiGLU) go too.
    args["enable_liger_kernel"] = False
    return [Problem(
        file, "llamafactory.enable_liger_kernel",
        f"switched off: ZeRO-3 with a trainable lm_head breaks Liger's fused linear cross-entropy at the first "
        f"backward ({LIGER_Z3_SOURCE}). Cost: the full logits (tokens x vocabulary, fp32) are held, and Liger's "
        "RMSNorm/RoPE/SwiGLU kernels are off too (LLaMA-Factory switches Liger as a whole)",
        "deepspeed: zero2 keeps Liger; it comes back here once a GPU run shows the combination works",
        severity="note")]


RULES = (
    Rule("neat packing + flash-attn 2 needs micro-batch 1", NEAT_FA2_SOURCE, _neat_packing_fa2),
    Rule("Liger fused linear cross-entropy + ZeRO-3 + trainable lm_head", LIGER_Z3_SOURCE, _liger_zero3_lm_head),
)


def apply(args: dict[str, Any], ds_config: str | None, file: str) -> list[Problem]:
    """Every rule on the rendered LLaMA-Factory arguments (edited in place where a rule renders a value)."""
    stage = zero_stage(ds_config)
    problems: list[Problem] = []
    for rule in RULES:
        problems += rule.apply(args, stage, file)
    return problems
