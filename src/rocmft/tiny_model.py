"""The tiny test model, built on demand: a recipe naming models/tiny-llama trains in a fresh clone without a
`make demo` first. The builder is scripts/make_tiny_model.py (the one `make tiny-model`, `make demo` and the
tests run), started as a process of a Python that has torch: the host CLI itself imports no torch.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from .problems import Problem

PATH = "models/tiny-llama"  # scripts/make_tiny_model.py --out default
MARK = "rocmft-tiny.json"  # written last by the builder: a model dir without it is a half-built one


def named(model: str, root: Path) -> bool:
    if not model:
        return False
    path = Path(model).expanduser()
    path = path if path.is_absolute() else root / path
    return path.resolve() == (root / PATH).resolve()


def builder_argv(root: Path, python: str | None = None) -> list[str]:
    return [python or sys.executable, str(root / "scripts" / "make_tiny_model.py"), "--out", PATH]  # cwd: root


def ensure(model: str, root: Path, *, file: str = "", key: str = "model_name_or_path",
           python: str | None = None) -> list[Problem]:
    """Build the tiny model when `model` names it and it is not built; problems when it cannot be."""
    if not named(model, root) or (root / PATH / MARK).is_file():
        return []
    if python is None and importlib.util.find_spec("torch") is None:
        return [Problem(file, key, f"`{PATH}` is not built, and this venv has no torch to build it",
                        "`make tiny-model` (it sets up the CPU stack first)")]
    proc = subprocess.run(builder_argv(root, python), cwd=root, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:  # the builder has printed its log's tail
        return [Problem(file, key, f"building `{PATH}` failed (exit {proc.returncode})", "see the lines above")]
    return []
