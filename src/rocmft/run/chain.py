"""FROM=: a run that starts where an earlier one ended (SFT, then DPO), as the LLaMA-Factory keys it needs.

- A run (its dir, its name under runs/, or `last`) with a merged export (`make export`): the export is the
  model. A LoRA DPO's reference (the adapter switched off) is then that merged SFT model, as DPO wants.
- A run with an adapter (its final one, or its newest checkpoint's when it stopped early): the run's base model
  with `adapter_name_or_path` and `create_new_adapter`: LLaMA-Factory merges the SFT adapter into the base
  weights and trains a fresh adapter on top (model/adapter.py), so the reference is the SFT model again.
  Not under ZeRO-3: LLaMA-Factory cannot merge into sharded weights and would go on training the SFT adapter
  itself against a reference without it; refused, with `make export` as the way.
- A full fine-tune's run: its output is the model.
- A folder: an adapter (adapter_config.json) on the recipe's model, or a model (config.json).
A run's model and chat template come with it (the model learnt that format); a note says what they replaced.

Pure file checks (no torch): what a run saved is read by serve.target, the one reader of run outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..io import paths
from ..io.problems import Problem, ProblemReport
from ..recipe.recipes import Recipe
from . import pick
from .adapters import upstream_adapters as upstream_adapters  # re-exported: cli/export.py, tests


@dataclass(frozen=True)
class Start:
    overrides: list[str]
    spec: str  # the run dir or folder FROM resolved to (`last` pinned down): a resumed run starts there again
    source: str  # what the run starts from, in words, as status.json records it
    notes: list[Problem] = field(default_factory=list)


def resolve(spec: str, recipe: Recipe) -> Start:
    from . import target

    folder = Path(spec).expanduser()
    folder = folder if folder.is_absolute() else paths.root() / folder
    is_run = spec == "last" or (folder / "train.yaml").is_file() or (paths.runs_dir() / spec / "train.yaml").is_file()
    if not is_run:
        return _folder(spec, folder, recipe)
    run_dir, notes = pick.pick(spec, key="FROM")
    try:
        t = target.load(run_dir)
    except ProblemReport as report:
        raise ProblemReport([Problem("", "FROM", p.message, p.suggestion) for p in report.problems]) from None
    lf = recipe.llamafactory
    notes += [Problem("", "FROM", n.message, severity="note") for n in t.notes]
    for key, value in (("model_name_or_path", t.model), ("template", t.template)):
        if lf.get(key) and str(lf[key]) != str(value):
            notes.append(Problem(recipe.path, f"llamafactory.{key}", f"`{lf[key]}` replaced by `{value}`: FROM "
                                 f"{t.run_path} ({t.source})", severity="note"))
    overrides = [f"model_name_or_path={t.model}", f"template={t.template}"]
    if t.adapter:
        overrides += _adapter(t.adapter, recipe, f"make export RUN={t.name}")
    return Start(overrides, t.run_path, f"{t.run_path} ({t.source})", notes)


def _folder(spec: str, folder: Path, recipe: Recipe) -> Start:
    if (folder / "adapter_config.json").is_file():
        return Start(_adapter(spec, recipe, "merge it into its base model first"), spec, f"{spec} (adapter)")
    if (folder / "config.json").is_file():
        return Start([f"model_name_or_path={spec}"], spec, f"{spec} (model)")
    raise ProblemReport([Problem("", "FROM", f"`{spec}` is neither a run nor a folder holding an adapter "
                                 "(adapter_config.json) or a model (config.json)",
                                 "a run dir, its name under runs/, `last`, or a model/adapter folder; `make runs` lists runs")])


def _adapter(adapter: str, recipe: Recipe, export: str) -> list[str]:
    """Merge the earlier adapter(s) into the base and train a fresh one on top, where LLaMA-Factory can."""
    lf = recipe.llamafactory
    if str(lf.get("finetuning_type", "lora")) != "lora":
        raise ProblemReport([Problem(recipe.path, "FROM", f"{adapter} is a LoRA adapter; a "
                                     f"{lf.get('finetuning_type')} fine-tune starts from a whole model",
                                     f"{export}, then FROM= the run: its merged export is used")])
    if recipe.deepspeed.startswith("zero3"):
        raise ProblemReport([Problem(recipe.path, "FROM", f"{adapter} cannot be merged into a ZeRO-3-sharded model: "
                                     "LLaMA-Factory would train that adapter itself, against a reference without it",
                                     f"{export}, then FROM= the run: its merged export is used")])
    return [f"adapter_name_or_path={adapter}", "create_new_adapter=true"]
