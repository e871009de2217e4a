"""Shared by the image tests: a project tree holding the real files the image build reads."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
IMAGE_INPUTS = (".dockerignore", "docker/Dockerfile", "docker/entrypoint.sh", "pyproject.toml", "README.md",
                "requirements/train.txt", "requirements/lock.txt")


def copy_image_inputs(root: Path) -> None:
    """The checkout's own copies of what the build context and the Dockerfile read, under `root`."""
    for rel in IMAGE_INPUTS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
