"""The model card pushed as README.md: what a reader of the Hub repo needs to trust and reuse the model.

Front matter the Hub reads (base_model, library_name, datasets, tags) carries only what is a Hub id: a local
model folder or a dataset registered in data/dataset_info.json is named in the text instead (the Hub refuses a
`base_model` that is not one of its repos). Everything comes from the run dir: train.yaml (what LLaMA-Factory ran),
status.json (steps, final loss), eval.md (`make eval`), versions.json (rocmft and the stack).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..io import hostio
from .source import Published

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def _hub_id(name: str) -> bool:
    return bool(HUB_ID.fullmatch(name)) and not name.startswith(("models/", "runs/", "data/"))


def card(run: Published, what: str) -> str:
    train, status = run.train, hostio.read_json(run.run_dir / "status.json") or {}
    versions = hostio.read_json(run.run_dir / "versions.json") or {}
    stack = versions.get("host_stack") if isinstance(versions.get("host_stack"), dict) else {}
    base = str(train.get("model_name_or_path") or "")
    datasets = [d.strip() for d in str(train.get("dataset") or "").split(",") if d.strip()]
    adapter = what == "adapter"
    front: dict[str, Any] = {}
    if _hub_id(base):
        front["base_model"] = base
    front["library_name"] = "peft" if adapter else "transformers"
    if any(_hub_id(d) for d in datasets):
        front["datasets"] = [d for d in datasets if _hub_id(d)]
    front["tags"] = ["rocmft", "llama-factory", str(train.get("stage") or "sft"),
                     str(train.get("finetuning_type") or "lora")] + (["qlora"] if run.quantized else [])
    front["pipeline_tag"] = "text-generation"

    steps, loss = status.get("steps"), status.get("final_loss")
    recipe = str(status.get("recipe") or run.run_dir.name)
    kind = ("a LoRA adapter" + (f" trained on the {train['quantization_bit']}-bit base" if run.quantized else "")
            if adapter else "the full model" + (" (the LoRA adapter merged into its base)" if run.lora else ""))
    lines = [
        "---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "",
        f"# {run.run_dir.name}", "",
        f"{kind[0].upper()}{kind[1:]}, fine-tuned from `{base}` with "
        f"[LLaMA-Factory](https://github.com/hiyouga/LLaMA-Factory) by rocmft (recipe `{recipe}`).", "",
        "| | |", "|---|---|",
        f"| base model | `{base}` |",
        f"| datasets | {', '.join(f'`{d}`' for d in datasets) or '-'} |",
        f"| recipe | `{recipe}` ({train.get('stage', 'sft')}, {train.get('finetuning_type', 'lora')}, "
        f"template `{train.get('template', '-')}`) |",
        f"| steps | {steps if isinstance(steps, int) else '-'} |",
        f"| final loss | {f'{loss:.4f}' if isinstance(loss, (int, float)) else '-'} |",
        f"| rocmft | {stack.get('rocmft', '-')} (commit {versions.get('git_commit', '-')}) |",
        f"| stack | {', '.join(f'{k} {v}' for k, v in stack.items() if k != 'rocmft') or '-'} |",
        "",
    ]
    evaluated = hostio.read_text(run.run_dir / "eval.md")
    if evaluated:
        lines += ["## Evaluation (`make eval`)", "", evaluated.strip(), ""]
    lines += ["## Training arguments (LLaMA-Factory's train.yaml)", "", "```yaml",
              yaml.safe_dump(_shown_args(train), sort_keys=False).strip(), "```", ""]
    return "\n".join(lines)


def _shown_args(train: dict[str, Any]) -> dict[str, Any]:
    """train.yaml as LLaMA-Factory read it, less the paths of this machine's run dir."""
    return {k: v for k, v in train.items() if k not in ("output_dir", "deepspeed", "resume_from_checkpoint")}
