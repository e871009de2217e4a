"""The tiny test model, built on demand: a recipe naming models/tiny-llama trains in a fresh clone without a
`make demo` first. The builder is scripts/make_tiny_model.py (the one `make tiny-model`, `make demo` and the
tests run), started as a process of a Python that has torch (this venv's, or the arch's image on a light host):
the host CLI itself imports no torch.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
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


def image_argv(root: Path, image: str, uid: int, gid: int) -> list[str]:
    """The same builder in the arch's image (a light host has no torch): the checkout read-only as every
    container sees it (launch/docker/spec.py), models/ writable, offline, the invoking user (files it owns)."""
    models = root / "models"
    return ["docker", "run", "--rm", f"--user={uid}:{gid}", f"--workdir={root}", f"--volume={root}:{root}:ro",
            f"--volume={models}:{models}", "--env=HOME=/tmp", "--env=HF_HUB_OFFLINE=1",
            "--label=ai.rocmft.role=tiny-model", image, "python", "scripts/make_tiny_model.py", "--out", PATH]


def ensure(model: str, root: Path, *, file: str = "", key: str = "model_name_or_path", python: str | None = None,
           image: Callable[[], tuple[str | None, str]] | None = None) -> list[Problem]:
    """Build the tiny model when `model` names it and it is not built; problems when it cannot be. Here when
    this venv has torch, else in the image `image()` names ((image id, "") or (None, why not))."""
    if not named(model, root) or (root / PATH / MARK).is_file():
        return []
    if python is not None or importlib.util.find_spec("torch") is not None:
        argv = builder_argv(root, python)
    else:
        ref, why = image() if image else (None, "no image was looked for")
        if ref is None:
            return [Problem(file, key, f"`{PATH}` is not built: this venv has no torch to build it, and {why}",
                            "`make tiny-model` (it sets up the CPU stack first)")]
        (root / "models").mkdir(exist_ok=True)  # else the daemon creates the mount's source, owned by root
        argv = image_argv(root, ref, os.getuid(), os.getgid())
    proc = subprocess.run(argv, cwd=root, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:  # the builder has printed its log's tail
        return [Problem(file, key, f"building `{PATH}` failed (exit {proc.returncode})", "see the lines above")]
    return []
