"""Facts for a row that the metrics do not hold as such: the method, ZeRO stage, recipe spec, commit, GPU
model, MFU and peak memory."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..hardware import arches
from ..io import paths
from ..run import runs


def zero_stage(preset: str) -> str:
    return {"none": "none", "zero0": "0", "zero1": "1", "zero2": "2", "zero3": "3", "zero3-replicated": "3-replicated",
            "zero3-offload-optimizer": "3-offload-optimizer", "zero3-offload": "3-offload"}.get(
        preset, preset)


def method(lf: Mapping[str, Any]) -> str:
    name = str(lf.get("finetuning_type") or "lora")
    bits = lf.get("quantization_bit")
    return f"{name}+{bits}bit" if isinstance(bits, int) and not isinstance(bits, bool) else name


def recipe_spec(path: str, name: str) -> str:
    """How the report finds the recipe again: its name when it is a shipped recipe, else its path."""
    shipped = paths.recipes_dir() / f"{name}.yaml"
    try:
        if shipped.resolve() == Path(path).resolve():
            return name
    except OSError:
        pass
    return runs.relative(Path(path))


def commit(root: Path | None = None) -> str:
    """HEAD, with +dirty when tracked files other than results/ differ: appending rows is not a code change."""
    root = root or paths.root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)results"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def _smi_product() -> str | None:
    """The GPU's marketing name from amd-smi or rocm-smi on this host, when either is installed."""
    if shutil.which("amd-smi"):
        try:
            out = subprocess.run(["amd-smi", "static", "--asic", "--json"], capture_output=True, text=True, timeout=20, check=False)
            data = json.loads(out.stdout)
            items = data if isinstance(data, list) else data.get("gpu_data", [data]) if isinstance(data, dict) else []
            for item in items:
                name = (item.get("asic") or {}).get("market_name") if isinstance(item, dict) else None
                if name and name.upper() != "N/A":
                    return str(name).strip()
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
            pass
    if shutil.which("rocm-smi"):
        try:
            out = subprocess.run(["rocm-smi", "--showproductname", "--json"], capture_output=True, text=True, timeout=20, check=False)
            for card in json.loads(out.stdout).values():
                for key in ("Card Series", "Card series", "Card Model", "Card model"):
                    if isinstance(card, dict) and card.get(key) and card[key] != "N/A":
                        return str(card[key]).strip()
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
            pass
    return None


def gpu_model(arch: arches.Arch, metrics: Mapping[str, Any]) -> str:
    """What the training process saw (torch's device name), else amd-smi/rocm-smi here, else the arch's first
    product; `cpu` on the cpu arch."""
    if not arch.is_gpu:
        return "cpu"
    seen = str(metrics.get("device") or "").strip()
    if seen and seen not in ("gpu", "cpu"):
        return seen
    # A module-global lookup at call time: the tests replace rocmft.bench.facts._smi_product (no amd-smi here).
    return _smi_product() or (arch.products[0] if arch.products else arch.name)


def compute_mfu(tokens_per_s_per_gpu: float | None, flops_per_token: float | None, peak_tflops: float | None) -> float | None:
    """Achieved FLOP/s per GPU over the arch's dense peak; None when any part is unknown."""
    if not tokens_per_s_per_gpu or not flops_per_token or not peak_tflops:
        return None
    return tokens_per_s_per_gpu * flops_per_token / (peak_tflops * 1e12)


def peak_memory_gib(metrics: Mapping[str, Any]) -> float | None:
    """GPU: the caching allocator's peak (max_memory_reserved, what counts against the card); CPU: peak RSS."""
    mem = metrics.get("peak_memory") or {}
    if mem.get("kind") == "gpu":
        return mem.get("reserved_gib")
    return mem.get("rss_gib")
