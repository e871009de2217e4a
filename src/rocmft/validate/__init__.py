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


def check_rendered(args: dict[str, Any], ds_config: str | None, arch_name: str, world_size: int,
                   train_file: str, ds_file: str, root: Path | None = None) -> list[Problem]:
    """Everything about one rendered run: all problems and notes, errors first."""
    from . import deepspeed as ds_check
    from . import inputs
    from . import llamafactory as lf_check

    arch = arches.table().get(arch_name)
    lf = lf_check.check(args, train_file, arch)
    problems = list(lf.problems)
    if ds_config is not None:
        problems += ds_check.check(json.loads(ds_config), ds_file, lf.hf_args, world_size)
    problems += inputs.check(args, train_file, root or paths.root())
    return problems + lf.notes


# ---- a small cache, so `make train` re-validates only what changed (LLaMA-Factory's import costs ~8 s)

def _stack_versions() -> str:
    found = []
    for dist in ("llamafactory", "transformers", "deepspeed", "rocmft"):
        try:
            found.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist}=none")
    return ",".join(found)


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in (*parts, _stack_versions()):
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
