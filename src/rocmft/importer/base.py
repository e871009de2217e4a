"""Which base the recipe inherits, and what its `llamafactory:` block says on top of it.

The block carries the user's arguments that differ from the base, verbatim. Where the base sets a key the
user's file did not, the user's run used LLaMA-Factory's default: for what is trained (learning rate, LoRA
shape, warmup, cutoff...) the block says `null` (the key is removed, LLaMA-Factory's default applies, as
before); for how the run is logged and saved (RUN_KEYS) the base's value is taken and said. Bases are read
from recipes/_base/ as they are on disk: the one made for the file's stage and finetuning_type wins, then
the one that needs the fewest lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..io import paths
from ..recipe import recipes

# LLaMA-Factory 0.9.5's (and transformers 5's TrainingArguments') defaults for what the bases set: a base value
# equal to it needs no line. tests/unit/importer/test_base.py holds this table to the installed dataclasses; a
# key missing here is written as `null` (LLaMA-Factory's default applies), which is always right, only longer.
LF_DEFAULTS: dict[str, Any] = {
    "stage": "sft", "do_train": False, "dataset_dir": "data", "cutoff_len": 2048, "preprocessing_num_workers": None,
    "lr_scheduler_type": "linear", "warmup_steps": 0, "max_grad_norm": 1.0, "num_train_epochs": 3.0,
    "logging_steps": 500, "save_steps": 500, "save_total_limit": None, "plot_loss": False, "report_to": "none",
    "ddp_timeout": 1800, "finetuning_type": "lora", "lora_target": "all", "lora_rank": 8, "lora_alpha": None,
    "lora_dropout": 0.0, "learning_rate": 5e-5, "dataloader_num_workers": 0,
}
LF_STAGE, LF_METHOD = LF_DEFAULTS["stage"], LF_DEFAULTS["finetuning_type"]
_NO_DEFAULT = object()
# How a run is logged, saved and fed, not what it learns: the base's values are rocmft's (progress needs logged
# steps, save_total_limit keeps the disk from filling). `do_train` is here because a train recipe must train.
RUN_KEYS = ("do_train", "dataset_dir", "preprocessing_num_workers", "logging_steps", "save_steps", "save_total_limit",
            "plot_loss", "report_to", "ddp_timeout", "dataloader_num_workers")


@dataclass
class Layered:
    base: str  # as the recipe names it: _base/lora.yaml
    merged: dict[str, Any]  # the base chain merged: project fields and its llamafactory block
    carried: dict[str, Any]  # the recipe's llamafactory block: values, and None (`null`) for the base's to remove
    inherited: dict[str, Any] = field(default_factory=dict)  # base values the user's file did not set, kept


def same(a: Any, b: Any) -> bool:
    """Equal as LLaMA-Factory reads them: 3 and 3.0 are; true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def layer(base_lf: dict[str, Any], args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the block to write, the base's values kept for keys the user did not set)."""
    carried = {k: v for k, v in args.items() if k not in base_lf or not same(base_lf[k], v)}
    inherited = {}
    for key, value in base_lf.items():
        if key in args or same(LF_DEFAULTS.get(key, _NO_DEFAULT), value):
            continue
        if key in RUN_KEYS:
            inherited[key] = value
        else:
            carried[key] = None
    return carried, inherited


def candidates() -> list[Path]:
    return sorted((paths.recipes_dir() / "_base").glob("*.yaml"))


def choose(args: dict[str, Any]) -> Layered:
    stage, method = args.get("stage", LF_STAGE), args.get("finetuning_type", LF_METHOD)
    ranked = []
    for path in candidates():
        merged, chain = recipes.load_chain(path)
        lf = dict(merged.get("llamafactory") or {})
        # the base made for this stage and method (lora.yaml for LoRA), not a shared parent that only defaults to it
        fit = (lf.get("stage", LF_STAGE) == stage) + (lf.get("finetuning_type", LF_METHOD) == method) \
            + ("finetuning_type" in lf and lf["finetuning_type"] == method)
        carried, inherited = layer(lf, args)
        name = f"_base/{path.name}"
        ranked.append(((-fit, len(carried), -len(chain), name), Layered(name, merged, carried, inherited)))
    if not ranked:
        raise FileNotFoundError(f"no base recipes in {paths.recipes_dir() / '_base'}")
    return min(ranked, key=lambda item: item[0])[1]


def text(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").removesuffix(" ...")


def default_text(key: str) -> str:
    return f"LLaMA-Factory's default: {text(LF_DEFAULTS[key])}" if key in LF_DEFAULTS else "LLaMA-Factory's default"


def describe(layered: Layered, report) -> None:
    base_lf = layered.merged.get("llamafactory") or {}
    for key, value in layered.carried.items():
        if value is None and key in base_lf:
            report.add("defaults", f"{key}: null ({default_text(key)}; {layered.base} sets {text(base_lf[key])})")
    for key, value in layered.inherited.items():
        why = ": your file had none, so LLaMA-Factory would not have trained" if key == "do_train" else ""
        report.add("inherited", f"{key}: {text(value)} ({default_text(key)}{why})")
