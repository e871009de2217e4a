"""The arch table (docker/arches.yaml) as typed data.

Read by the image build, the launcher, the planner and the renderer: one source for each arch fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import yaml

from . import paths
from .problems import Problem, ProblemReport, did_you_mean


@dataclass(frozen=True)
class Arch:
    name: str
    products: tuple[str, ...]
    family: str
    status: str
    base_image: str
    rocm: str | None
    torch: str | None
    python: str | None
    pytorch_rocm_arch: str
    gpu_memory_gb: float | None
    gpus_per_node: int
    bf16: bool
    peak_tflops: Mapping[str, float] = field(default_factory=dict)
    mfu: tuple[float, float] | None = None  # planner's default utilisation range of the dense peak (sources in the table)
    attention: str = "sdpa"
    flash_attn: str = "none"
    bitsandbytes: bool = False
    hipblaslt: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    rccl_env: Mapping[str, str] = field(default_factory=dict)
    # Only for a run on all gpus_per_node GPUs of a single node (AMD's RCCL channel count is tuned for that).
    full_node_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_gpu(self) -> bool:
        return self.family != "cpu"

    def peak(self, precision: str) -> float | None:
        """Dense peak TFLOP/s for a compute precision, or None when the table does not know it."""
        return self.peak_tflops.get(precision) if self.peak_tflops else None


def _build(name: str, entry: dict, defaults: dict) -> Arch:
    merged = {**defaults, **entry}
    return Arch(
        name=name,
        products=tuple(merged.get("products", ())),
        family=merged["family"],
        status=merged.get("status", "supported"),
        base_image=merged["base_image"],
        rocm=None if name == "cpu" else merged.get("rocm"),
        torch=merged.get("torch"),
        python=merged.get("python"),
        pytorch_rocm_arch=merged.get("pytorch_rocm_arch", name),
        gpu_memory_gb=merged.get("gpu_memory_gb"),
        gpus_per_node=int(merged["gpus_per_node"]),
        bf16=bool(merged["bf16"]),
        peak_tflops=MappingProxyType(dict(merged.get("peak_tflops") or {})),
        mfu=tuple(float(v) for v in merged["mfu"]) if merged.get("mfu") else None,
        attention=merged.get("attention", "sdpa"),
        flash_attn=merged.get("flash_attn", "none"),
        bitsandbytes=bool(merged.get("bitsandbytes", False)),
        hipblaslt=bool(merged.get("hipblaslt", False)),
        env=MappingProxyType({k: str(v) for k, v in (merged.get("env") or {}).items()}),
        rccl_env=MappingProxyType({k: str(v) for k, v in (merged.get("rccl_env") or {}).items()}),
        full_node_env=MappingProxyType({k: str(v) for k, v in (entry.get("full_node_env") or {}).items()}),
    )


@lru_cache(maxsize=None)
def _load(path: str) -> Mapping[str, Arch]:
    raw = yaml.safe_load(Path(path).read_text())
    defaults = raw.get("defaults", {})
    return MappingProxyType({name: _build(name, entry, defaults) for name, entry in raw["arches"].items()})


def table(path: Path | None = None) -> Mapping[str, Arch]:
    return _load(str(path or paths.arches_file()))


def get(name: str, *, file: str = "", key: str = "arch") -> Arch:
    arches = table()
    if name not in arches:
        hint = did_you_mean(str(name), arches) or f"known arches: {', '.join(arches)}"
        raise ProblemReport([Problem(file, key, f"unknown arch `{name}`", hint)])
    return arches[name]
