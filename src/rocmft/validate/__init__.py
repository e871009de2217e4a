"""Validation before launch: LLaMA-Factory's parser, DeepSpeed's config model, and the inputs on disk.

Importing this package is cheap; the checks import LLaMA-Factory/DeepSpeed (and so torch) when called.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import arches, paths
from ..problems import Problem


def check_stack(args: dict[str, Any], ds_config: str | None, arch_name: str, world_size: int,
                train_file: str, ds_file: str) -> list[Problem]:
    """LLaMA-Factory's parser and DeepSpeed's config model on one rendered run: errors first, then notes.
    Needs the training stack: it runs in the venv or inside the arch's image (`validate.where`)."""
    from . import deepspeed as ds_check
    from . import llamafactory as lf_check

    arch = arches.table().get(arch_name)
    lf = lf_check.check(args, train_file, arch)
    problems = list(lf.problems)
    if ds_config is not None:
        problems += ds_check.check(json.loads(ds_config), ds_file, lf.hf_args, world_size)
    return problems + lf.notes


def check_rendered(args: dict[str, Any], ds_config: str | None, arch_name: str, world_size: int,
                   train_file: str, ds_file: str, root: Path | None = None) -> list[Problem]:
    """Everything about one rendered run: all problems and notes, errors first."""
    from . import inputs

    stack = check_stack(args, ds_config, arch_name, world_size, train_file, ds_file)
    found = stack + inputs.check(args, train_file, root or paths.root())
    return sorted(found, key=lambda p: p.severity != "error")


# ---- a small cache, so `make train` re-validates only what changed (LLaMA-Factory's import costs ~8 s)

def _stack_versions() -> str:
    found = []
    for dist in ("llamafactory", "transformers", "deepspeed", "rocmft"):
        try:
            found.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist}=none")
    return ",".join(found)


def cache_key(*parts: str, stack: str | None = None) -> str:
    """`stack` names what judged the inputs (an image id, a SIF); default: this venv's versions."""
    digest = hashlib.sha256()
    for part in (*parts, stack or _stack_versions()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _cache_file(key: str) -> Path:
    return paths.cache_dir() / "validated" / key


def already_valid(key: str) -> bool:
    return _cache_file(key).is_file()


def remember_valid(key: str) -> None:
    path = _cache_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
