"""A fresh clone trains tiny-cpu with `make train` alone: no `make demo` first builds models/tiny-llama, the
pipeline builds it (scripts/make_tiny_model.py, as `make demo` does) before the checks that look for it.

One short run (2 steps) in a copy of the project without models/, sharing this checkout's venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT, make_env

LEFT_OUT = {".venv", ".git", "models", "runs", ".cache", "build", "wheelhouse", ".pytest_cache", "llamaboard_cache",
            "llamaboard_config", "saves"}


@pytest.mark.train
def test_make_train_in_a_fresh_clone_builds_the_tiny_model_then_trains(tmp_path):
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, symlinks=True,
                    ignore=lambda folder, names: LEFT_OUT & set(names) if folder == str(ROOT) else
                    [n for n in names if n == "__pycache__"])
    os.symlink(ROOT / ".venv", clone / ".venv")  # the venv is set up; the clone lacks only the model
    assert not (clone / "models").exists()
    env = make_env(tmp_path)
    env.pop("ROCMFT_ROOT", None)
    proc = subprocess.run(["make", "-s", "train", "RECIPE=tiny-cpu", "RUNTIME=local", "RUN_NAME=fresh",
                           "SET=max_steps=2"], cwd=clone, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = proc.stdout
    assert (clone / "models" / "tiny-llama" / "rocmft-tiny.json").is_file()
    built = out.index("tiny model: models/tiny-llama (built")
    assert built < out.index("run dir:")  # built before anything of the run exists
    assert "Hub" not in out and "Traceback" not in out
    run = tmp_path / "runs" / "fresh"
    assert (run / "output" / "adapter_model.safetensors").is_file()
