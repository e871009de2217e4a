"""What a run reads must exist before any process starts: the model and every dataset it names, each dataset
of the kind the recipe's `stage` trains on.

LLaMA-Factory finds out minutes later, after the launch, on every rank, or not at all: an SFT set under
`stage: kto` loses every row in preprocessing, one under `stage: pt` trains on its prompts alone. Pure file
checks, no heavy imports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..data import formats
from ..io.problems import Problem, did_you_mean
from ..recipe import stages

KIND_ROWS = {"sft": "supervised (prompt and answer)", "preference": "preference-pair (chosen/rejected)",
             "kto": "KTO (labelled answer)", "text": "plain-text"}


def is_local_path(name: str, root: Path) -> bool:
    if name.startswith(("/", "./", "../", "~")):
        return True
    # `models/x` is a folder of the project; `org/model` is a hub id (validate/model.py: the HF cache or the Hub).
    return (root / name.split("/", 1)[0]).is_dir()


def _hub_registry(dataset_dir: str) -> str:
    """Why the datasets cannot be looked up on disk, when `dataset_dir` names the Hub rather than a folder."""
    if dataset_dir.startswith("REMOTE:"):
        return (f"dataset_info.json comes from the Hub dataset repo `{dataset_dir[len('REMOTE:'):]}` when the job "
                "starts; the dataset names are checked there, not here")
    if dataset_dir == "ONLINE":
        return "the datasets are Hub dataset ids, loaded when the job starts; not checked here"
    return ""


def check(args: dict[str, Any], file: str, root: Path, key_prefix: str = "") -> list[Problem]:
    problems: list[Problem] = []
    model = str(args.get("model_name_or_path") or "")
    if not model:
        problems.append(Problem(file, f"{key_prefix}model_name_or_path", "missing: a local model dir or a hub id"))
    elif is_local_path(model, root):
        path = Path(model).expanduser()
        path = path if path.is_absolute() else root / path
        if not (path / "config.json").is_file():
            hint = ("build it with `make tiny-model`" if "tiny" in model else
                    "put the model dir there, or give a Hub id (`make fetch MODEL=org/name` downloads one)")
            problems.append(Problem(file, f"{key_prefix}model_name_or_path", f"no model at `{model}` (no config.json)", hint))
    return problems + _datasets(args, file, root, key_prefix)


def _datasets(args: dict[str, Any], file: str, root: Path, key_prefix: str) -> list[Problem]:
    wanted = {key: args.get(key) for key in ("dataset", "eval_dataset") if args.get(key)}
    if not wanted:
        return []
    dataset_dir = str(args.get("dataset_dir", "data"))
    hub = _hub_registry(dataset_dir)
    if hub:  # LLaMA-Factory reads these from the Hub when the job starts (data/parser.py): no folder here
        return [Problem(file, f"{key_prefix}dataset_dir", hub, severity="note")]
    folder = Path(dataset_dir)
    folder = folder if folder.is_absolute() else root / folder
    info_file = folder / "dataset_info.json"
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [Problem(file, f"{key_prefix}dataset_dir", f"no dataset_info.json in `{dataset_dir}`")]
    except json.JSONDecodeError as exc:
        return [Problem(str(info_file), "", f"not valid JSON: {exc}")]
    stage = str(args.get("stage") or "sft")
    problems: list[Problem] = []
    for key, names in wanted.items():
        names = names if isinstance(names, list) else [n.strip() for n in str(names).split(",")]
        for name in names:
            if name not in info:
                problems.append(Problem(file, f"{key_prefix}{key}", f"dataset `{name}` is not registered in {info_file.name}",
                                        did_you_mean(name, info) or "register it with `make data IN=file.jsonl NAME=name`"))
                continue
            local = info[name].get("file_name") if isinstance(info[name], dict) else None
            if local and not (folder / local).exists():
                problems.append(Problem(file, f"{key_prefix}{key}", f"dataset `{name}` points at `{local}`, which does not exist"))
            problems += _kind_problems(file, f"{key_prefix}{key}", name, info[name], stage)
    return problems


def _kind_problems(file: str, key: str, name: str, entry, stage: str) -> list[Problem]:
    """One line naming the stage and the dataset when the dataset's rows are of another kind than it trains on."""
    want, got = stages.KINDS.get(stage), formats.entry_kind(entry)
    if want is None or got is None or got == want:
        return []
    return [Problem(file, key, f"dataset `{name}` holds {KIND_ROWS[got]} rows, but `stage: {stage}` trains on "
                    f"{KIND_ROWS[want]} rows",
                    f"train it with a `stage: {stages.STAGE_OF_KIND[got]}` recipe, or name a dataset of {KIND_ROWS[want]} rows; "
                    "`make data` says which kind a file holds")]
