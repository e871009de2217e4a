"""The user's files as data: the LLaMA-Factory train YAML (with what the shell line adds) and its DeepSpeed JSON.

Input that cannot become a recipe is refused here with one line: not YAML, not a mapping, a rocmft recipe
already, an inference or export config, a DeepSpeed JSON that is not JSON or cannot be found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import paths
from ..io.problems import Problem, ProblemReport
from ..recipe import recipes
from ..validate.deepspeed import TOP_LEVEL_KEYS

# `rocmft render` writes this first line; a file it rendered says which arch it was rendered for.
RENDERED_HEADER = re.compile(r"^# LLaMA-Factory train config rendered by rocmft \S+ from recipe `[^`]*` for (\S+)\.$")


@dataclass
class Source:
    path: Path
    args: dict[str, Any]  # the YAML's arguments, then the shell line's on top (as LLaMA-Factory merges them)
    yaml_args: dict[str, Any]  # the YAML's alone
    rendered_for: str  # the arch a rocmft-rendered file names in its header; "" otherwise


def _refuse(file: str, message: str, hint: str = "") -> ProblemReport:
    return ProblemReport([Problem(file, "", message, hint)])


def read_train_yaml(file: str, cmd_args: dict[str, Any]) -> Source:
    path = Path(file).expanduser()
    if not path.is_file():
        raise _refuse(file, "file not found", "FILE= names your LLaMA-Factory train YAML")
    try:
        data = recipes.read_yaml(path)
    except UnicodeDecodeError:
        raise _refuse(file, "not a text file", "FILE= takes a LLaMA-Factory train YAML") from None
    except ProblemReport as report:  # YAML syntax error or not a mapping: already one line naming the file
        raise _refuse(file, report.problems[0].message, "FILE= takes a LLaMA-Factory train YAML") from None
    if "llamafactory" in data or "base" in data:
        raise _refuse(file, "already a rocmft recipe", "start from it with `make copy RECIPE=... TO=...`")
    args = {**data, **cmd_args}
    if not args:
        raise _refuse(file, "empty: no LLaMA-Factory arguments", "FILE= takes a LLaMA-Factory train YAML")
    refused = not_a_train_config(args)
    if refused:
        raise _refuse(file, refused, "import takes the YAML you pass to `llamafactory-cli train`")
    first = path.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
    match = RENDERED_HEADER.match(first[0]) if first else None
    return Source(path, args, data, match.group(1) if match else "")


def not_a_train_config(args: dict[str, Any]) -> str:
    """Why these arguments do not train (an export, inference or evaluation config), or ""."""
    if "export_dir" in args:
        return "an export config (export_dir), not a train config"
    if args.get("do_train") is False or (not args.get("do_train") and (args.get("do_predict") or args.get("do_eval"))):
        return "an evaluation/prediction config (do_train is not true), not a train config"
    if not args.get("do_train") and not args.get("dataset"):
        return "no do_train and no dataset: an inference (chat/api) config, not a train config"
    return ""


def find_ds(named: str, yaml_file: Path) -> Path:
    """The JSON a YAML's `deepspeed:` names: LLaMA-Factory resolves it from where it runs; look next to the
    YAML first, then there, then in the project root (a rendered file names it from the root)."""
    candidate = Path(named)
    for folder in ((Path(),) if candidate.is_absolute() else (yaml_file.parent, Path.cwd(), paths.root())):
        if (folder / candidate).is_file():
            return folder / candidate
    raise _refuse(str(yaml_file), f"deepspeed: `{named}` not found next to it or in the current folder",
                  "give the JSON with DS=path/to/ds_config.json")


def read_ds_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(str(path), "file not found", "DS= names your DeepSpeed JSON") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else ""
        raise _refuse(str(path), f"not valid JSON{where}", "DS= takes a DeepSpeed config JSON") from None
    if not isinstance(data, dict):
        raise _refuse(str(path), "a DeepSpeed config must be a JSON object", "DS= takes a DeepSpeed config JSON")
    # A YAML from elsewhere names its JSON (`deepspeed: ../.docker/config.json`): a file of the user's that is not
    # DeepSpeed's is refused whole, before any of it is compared, kept or printed (issue 43, N8).
    if not any(key in TOP_LEVEL_KEYS for key in data):
        raise _refuse(str(path), "not a DeepSpeed config: DeepSpeed reads none of its keys (nothing of it is shown)",
                      "DS= names your DeepSpeed config JSON")
    return data
