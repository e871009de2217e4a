"""Validation before launch: LLaMA-Factory's parser, DeepSpeed's config model, and the inputs on disk.

Importing this package is cheap; the checks import LLaMA-Factory/DeepSpeed (and so torch) when called.

May import: io, hardware, recipe, data, image, launch.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from ..hardware import arches
from ..io import paths
from ..io.problems import Problem


def check_stack(args: dict[str, Any], ds_config: str | None, arch_name: str, world_size: int,
                train_file: str, ds_file: str) -> list[Problem]:
    """LLaMA-Factory's parser and DeepSpeed's config model on one rendered run: errors first, then notes.
    Needs the training stack: it runs in the venv or inside the arch's image (`validate.where`)."""
    from . import deepspeed as ds_check
    from . import llamafactory as lf_check
    from . import quantization, template

    arch = arches.table().get(arch_name)
    lf = lf_check.check(args, train_file, arch)
    problems = list(lf.problems) + quantization.check(args, ds_config, arch, train_file) + template.check(args, train_file)
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
#
# A cached "valid" is only as good as what judged: the key holds the rendered files, the venv's (or the
# image's) stack, and a digest of the rocmft code that ran the checks. The package version alone would
# never change between commits: after a `git pull` that changes validation, recipes kept passing on
# stale verdicts. The templates need no digest of their own: what they render is in the key.

CACHE_ENV = "ROCMFT_VALIDATION_CACHE"  # a folder of its own (the tests give each run a fresh one)


def _stack_versions() -> str:
    found = []
    for dist in ("llamafactory", "transformers", "deepspeed"):
        try:
            found.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist}=none")
    return ",".join(found)


def judging_source(kind: str, root: Path) -> Path:
    """The rocmft package that runs the checks: this process's own in the venv; in a container or SIF the
    mounted checkout's `src/` (`where.container_request` puts it first on PYTHONPATH), else the image's copy,
    which the image id in the key already covers."""
    own = Path(__file__).resolve().parents[1]
    if kind in ("docker", "apptainer"):
        mounted = root / "src" / "rocmft"
        return mounted if mounted.is_dir() else Path()
    return own


def code_digest(package: Path, arches_file: Path) -> str:
    """sha256 over every .py file of `package` (by relative path and content) and the arch table the checks
    read (bf16 per arch). The whole package rather than the modules validation imports today: an import
    added tomorrow cannot slip out of the key. ~10 ms; a `git pull` that touches any of it re-validates once."""
    digest = hashlib.sha256()
    named = [(str(f.relative_to(package)), f) for f in sorted(package.rglob("*.py"))] if package.name else []
    for name, path in [*named, ("arches.yaml", arches_file)]:
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


def cache_key(*parts: str, stack: str | None = None, code: str = "") -> str:
    """`stack` names what judged the inputs (an image id, a SIF); default: this venv's versions. `code`: the
    `code_digest` of the rocmft that ran the checks."""
    digest = hashlib.sha256()
    for part in (*parts, stack or _stack_versions(), code):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or paths.cache_dir() / "validated")


def already_valid(key: str) -> bool:
    try:
        return (cache_dir() / key).is_file()
    except OSError:  # a cache this user cannot read (made by root, say): validate, as without one
        return False


def remember_valid(key: str) -> None:
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / key).touch()
    except OSError:  # nor write: the next run validates again, nothing worse
        pass
