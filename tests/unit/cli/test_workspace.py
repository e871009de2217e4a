"""What the user makes lands in their workspace (my/, ignored by git), never in the tracked tree: after `make data`
and `make copy` in a git checkout, `git status` is clean (so `git pull` cannot conflict and an image built from
it is not "-dirty"), the dataset and the recipe are found by name, and a recipe naming the user's dataset beside
a shipped one trains from the user's registry, which lists the shipped entries too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


@pytest.fixture
def checkout(tmp_path):
    """The project's files as a fresh commit of a git repository of its own, sharing this venv."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    clone = tmp_path / "clone"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    os.symlink(ROOT / ".venv", clone / ".venv")
    subprocess.run([*GIT, "init", "-q"], cwd=clone, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=clone, check=True)
    subprocess.run([*GIT, "commit", "-qm", "clone"], cwd=clone, check=True)
    return clone


def _make(clone, *args, env) -> str:
    proc = subprocess.run(["make", "-s", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_make_data_and_copy_leave_git_status_clean(checkout, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCMFT_")}
    src = tmp_path / "mine.jsonl"
    src.write_text("".join(json.dumps({"instruction": f"q{i}", "output": f"a{i}"}) + "\n" for i in range(5)))
    out = _make(checkout, "data", f"IN={src}", "NAME=mine", env=env)
    assert "registered `mine` in my/data/dataset_info.json" in out
    out = _make(checkout, "copy", "RECIPE=tiny-cpu", "TO=my-tiny", env=env)
    assert "-> my/recipes/my-tiny.yaml" in out
    status = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=checkout, capture_output=True,
                            text=True, check=True).stdout
    assert status == ""
    registry = json.loads((checkout / "my" / "data" / "dataset_info.json").read_text())
    shipped = json.loads((checkout / "data" / "dataset_info.json").read_text())
    assert registry["demo_alpaca"]["file_name"] == "../../data/demo_alpaca.jsonl" and set(shipped) < set(registry)
    out = _make(checkout, "show", "RECIPE=my-tiny", "SET=dataset=mine,demo_alpaca", env=env)
    assert "dataset_dir: my/data" in out and "dataset: mine,demo_alpaca" in out
    assert "dataset_dir: data" in _make(checkout, "show", "RECIPE=my-tiny", env=env)  # the demo sets: as shipped
