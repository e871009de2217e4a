"""Pure: what `make eval` runs, as data: the LLaMA-Factory arguments of each pass, base and tuned.

Four passes of LLaMA-Factory's SFT workflow (llamafactory/train/sft/workflow.py), none of them training:
- `loss`: `do_eval` on the held-out rows -> `eval_loss` (perplexity = exp of it);
- `predict`: `do_predict` with `predict_with_generate` on up to N of them -> BLEU-4 and ROUGE as its
  ComputeSimilarity computes them (train/sft/metric.py), and the generated answers.
They are separate because `predict_with_generate` changes how the eval rows are tokenised (the prompt alone,
data/loader.py `do_generate`), which would make the loss meaningless.

The held-out rows are the ones the run held out: the run's own `dataset`, `val_size`, `seed` and `max_samples`
(LLaMA-Factory splits the raw rows before tokenising them, data/data_utils.py `split_dataset`, so the same
values give the same rows). DATA=<registered dataset> evaluates on that dataset instead (`eval_dataset`).

Base = the same model without the adapter(s): the run's `model_name_or_path` as trained on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io.problems import Problem, ProblemReport
from ..run.target import Target

DEFAULT_ROWS = 50  # generation is the slow part: a sample is enough to compare base and tuned
EXAMPLES = 3  # prompts shown with both answers
# Greedy decoding: the same answer every time, so base vs tuned is a comparison of models, not of luck.
GENERATION = {"do_sample": False, "max_new_tokens": 128}
# What decides which rows are held out and how they are tokenised: copied from the run's train.yaml.
DATA_KEYS = ("dataset", "dataset_dir", "val_size", "seed", "max_samples", "mix_strategy", "interleave_probs",
             "cutoff_len", "train_on_prompt", "mask_history", "streaming", "buffer_size", "media_dir",
             "preprocessing_num_workers")
EVAL_BATCH = 4  # per_device_eval_batch_size: small, so a 70B eval fits where its training did


@dataclass(frozen=True)
class EvalPlan:
    target: Target
    rows: int  # generation rows at most
    data: str  # "held-out" (the run's val_size rows) or the registered dataset's name
    passes: dict[str, dict[str, Any]] = field(default_factory=dict)  # "base.loss" -> LLaMA-Factory args

    def spec(self) -> dict[str, Any]:
        """What the job (rocmft.evaluate.job) reads: the passes and how many rows to generate for."""
        return {"rows": self.rows, "examples": EXAMPLES, "passes": self.passes}


def parse_rows(value: str | int | None) -> int:
    text = str(value).strip() if value is not None else ""
    if not text:
        return DEFAULT_ROWS
    if not text.isdigit() or int(text) < 1:
        raise ProblemReport([Problem("", "N", f"`{text}` is not a positive whole number of rows",
                                     f"e.g. N={DEFAULT_ROWS} (the default)")])
    return int(text)


def check_data(name: str, registry: Mapping[str, Any], dataset_dir: str) -> list[Problem]:
    """DATA= must be a dataset LLaMA-Factory can load by name from the run's dataset_dir."""
    if name in registry:
        entry = registry[name]
        if isinstance(entry, dict) and entry.get("ranking"):
            return [Problem("", "DATA", f"`{name}` is preference pairs (ranking: true): eval compares answers to "
                            "one reference answer", "DATA=<an SFT dataset> (`make data` lists them)")]
        return []
    from ..io.problems import did_you_mean

    hint = did_you_mean(name, registry) or "`make data` registers one; the registered ones are in " \
                                           f"{dataset_dir}/dataset_info.json"
    return [Problem("", "DATA", f"`{name}` is not a registered dataset in {dataset_dir}/dataset_info.json", hint)]


def build(target: Target, train: Mapping[str, Any], *, rows: int, data: str | None,
          registry: Mapping[str, Any]) -> EvalPlan:
    """The passes, or one line per reason there is nothing to evaluate on."""
    stage = str(train.get("stage", "sft"))
    dataset_dir = str(train.get("dataset_dir") or "data")
    problems: list[Problem] = []
    if data:
        problems += check_data(data, registry, dataset_dir)
    elif stage != "sft":
        what = {"dpo": "preference pairs", "kto": "labelled single answers", "pt": "plain text"}.get(stage, stage)
        problems.append(Problem("", "DATA", f"{target.run_path} is a {stage} run: its held-out rows are {what}, "
                                "not prompts with one reference answer", "DATA=<a registered SFT dataset>"))
    elif not float(train.get("val_size") or 0) > 0:
        problems.append(Problem("", "DATA", f"{target.run_path} held no rows out (its train.yaml has no val_size)",
                                "DATA=<a registered dataset>, or train with val_size (the bases set it)"))
    if problems:
        raise ProblemReport(problems)

    common: dict[str, Any] = {k: train[k] for k in DATA_KEYS if train.get(k) is not None}
    if data:
        for key in ("dataset", "val_size", "max_samples", "mix_strategy", "interleave_probs"):
            common.pop(key, None)
        common["eval_dataset"] = data
    common.update({"stage": "sft", "do_train": False, "template": target.template, "report_to": "none",
                   "per_device_eval_batch_size": EVAL_BATCH})
    common.update(target.carried)
    models = {"base": {"model_name_or_path": str(train.get("model_name_or_path") or target.model)},
              "tuned": {"model_name_or_path": target.model}}
    if target.adapter:
        models["tuned"].update(adapter_name_or_path=target.adapter, finetuning_type="lora")
    passes: dict[str, dict[str, Any]] = {}
    for who, model in models.items():
        passes[f"{who}.loss"] = {**model, **common, "do_eval": True}
        passes[f"{who}.predict"] = {**model, **common, "do_predict": True, "predict_with_generate": True,
                                    **GENERATION}
    return EvalPlan(target, rows, data or "held-out", passes)


def perplexity(loss: float | None) -> float | None:
    if loss is None:
        return None
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


def registry_for(root: Path, train: Mapping[str, Any]) -> dict[str, Any]:
    """The run's dataset registry (dataset_dir/dataset_info.json), {} when there is none."""
    from ..data import registry

    folder = Path(str(train.get("dataset_dir") or "data"))
    return registry.read(folder if folder.is_absolute() else root / folder)
