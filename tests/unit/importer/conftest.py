"""A project root of the test's own (ROCMFT_ROOT): the checkout's bases, templates, presets, arch table, data
and models, and an empty recipes/ (imports write into its my/recipes/), so a test can import under any name - a
shipped recipe's included - and the checkout's recipes/ is never touched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT

SEEDS = Path(__file__).parent / "seeds"


def make_project(folder: Path) -> Path:
    (folder / "recipes").mkdir(parents=True)
    shutil.copytree(ROOT / "recipes" / "_base", folder / "recipes" / "_base")
    (folder / "recipes" / "templates").symlink_to(ROOT / "recipes" / "templates", target_is_directory=True)
    for name in ("ds_configs", "docker", "data", "models"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    return folder


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    root = make_project(tmp_path / "project")
    monkeypatch.setenv("ROCMFT_ROOT", str(root))
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return root


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if "_base" not in p.parts and "templates" not in p.parts)
