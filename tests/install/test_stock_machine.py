"""The two install paths on a stock machine, for real (slow: `pytest -m install`).

- `make setup` in a fresh copy with pip's configuration hidden and TORCH_INDEX_URL pointed at a local
  index: the CPU torch, no CUDA, no nvidia-* package, and the training stack imports.
- The light host: `make image ARCH=gfx942 DRY_RUN=1` and `make plan` in a fresh copy install only the
  light dependencies: torch is not importable in the venv they made.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.install.conftest import fresh_copy, stock_env

pytestmark = pytest.mark.install

CHECK_CPU_STACK = """
import importlib.metadata as md, torch, llamafactory, deepspeed, bitsandbytes
gpu = [d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia")]
print("cuda", torch.version.cuda, "hip", torch.version.hip, "nvidia", gpu, "torch", torch.__version__)
print("bitsandbytes", bitsandbytes.__version__)
"""


def make(clone, *args, env, timeout=1200) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)


def test_make_setup_takes_the_cpu_torch_from_the_torch_index_never_cuda(tmp_path, torch_index):
    clone = fresh_copy(tmp_path / "clone")
    proc = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=torch_index))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert f"from TORCH_INDEX_URL={torch_index}" in out
    probe = subprocess.run([str(clone / ".venv/bin/python"), "-c", CHECK_CPU_STACK], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "cuda None hip None nvidia [] torch 2.13.0+cpu" in probe.stdout, probe.stdout
    assert "bitsandbytes 0.50.2" in probe.stdout, probe.stdout  # --no-deps beside the CPU torch (QLoRA on CPU)
    # What every rocmft process imports is compiled once, at setup, even where PYTHONDONTWRITEBYTECODE=1
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    for module in ("llamafactory/hparams/parser", "llamafactory/train/tuner", "deepspeed/runtime/config", "torch/__init__"):
        folder, name = (site / module).parent, (site / module).name
        assert list((folder / "__pycache__").glob(f"{name}.*.pyc")), f"no bytecode for {module}"
    # Idempotent: the second run installs nothing and says nothing.
    again = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=torch_index), timeout=120)
    assert again.returncode == 0 and "==>" not in again.stdout, again.stdout


def test_make_setup_without_a_cpu_torch_says_where_it_looked_in_one_line(tmp_path):
    clone = fresh_copy(tmp_path / "clone")
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    proc = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=str(empty)), timeout=600)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"TORCH_INDEX_URL={empty}" in errors[0] and "set TORCH_INDEX_URL" in errors[0]
    assert subprocess.run([str(clone / ".venv/bin/python"), "-c", "import torch"], capture_output=True).returncode != 0


def test_light_host_builds_image_plans_and_plans_without_torch(tmp_path):
    clone = fresh_copy(tmp_path / "clone")
    env = stock_env()
    image = make(clone, "image", "ARCH=gfx942", "DRY_RUN=1", env=env, timeout=300)
    assert image.returncode == 0, (image.stdout + image.stderr)[-3000:]
    assert "rocm/pytorch" in image.stdout
    plan = make(clone, "plan", "RECIPE=llama3-8b-z3", env=env, timeout=300)
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    assert "verdict:" in plan.stdout
    probe = subprocess.run([str(clone / ".venv/bin/python"), "-c", "import torch"], capture_output=True, text=True)
    assert "No module named 'torch'" in probe.stderr
    for heavy in ("llamafactory", "deepspeed", "transformers"):
        assert subprocess.run([str(clone / ".venv/bin/python"), "-c", f"import {heavy}"],
                              capture_output=True).returncode != 0, heavy
