"""The image build plan: a pure function of (arch, versions, commit, offline, wheelhouse).

Everything `make image` sends to Docker comes from here, so `--dry-run` shows exactly what a build
would do, and the unit tests pin it per arch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Mapping

from .. import __version__
from ..arches import Arch
from .versions import Versions

REPOSITORY = "rocmft"
DOCKERFILE = "docker/Dockerfile"
TARGET = "image"
LABEL_PREFIX = "ai.rocmft."
# Where the wheelhouse sits inside the build context (whatever folder it came from on the host).
CONTEXT_WHEELHOUSE = "wheelhouse/{arch}"
# DeepSpeed ops compiled into ROCm images (no GPU needed; everything else JIT-compiles on first use).
# Not CPU_ADAM: DeepSpeed's op_builder/builder.py compiles CPU ops with -march=native and the SIMD flags
# of the machine running `docker build` (DeepSpeed issue #1886), so a prebuilt one can die with an illegal
# instruction on a run host without AVX-512. It JIT-compiles on the run host instead (the base has the
# toolchain; TORCH_EXTENSIONS_DIR caches it), once, on the first offload run.
# The cpu arch builds none: its minimal base has no compiler (CPU ZeRO JIT needs one, see docs/image.md).
GPU_DS_OPS = ("FUSED_ADAM",)
FLASH_ATTN_MODES = ("auto", "skip")


def tags(arch: str, version: str = __version__) -> list[str]:
    """`rocmft:<version>-<arch>` (immutable per release) and the moving `rocmft:<arch>`."""
    return [f"{REPOSITORY}:{version}-{arch}", f"{REPOSITORY}:{arch}"]


@dataclass(frozen=True)
class BuildPlan:
    arch: str
    base_image: str
    dockerfile: str
    context: str  # the project root (what `docker build` would be given as its context)
    wheelhouse: str  # host folder whose wheels become /wheelhouse in the build ("" = none)
    offline: bool
    network_mode: str | None  # "none" when offline: the build has no network at all
    target: str
    buildargs: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["buildargs"] = dict(self.buildargs)
        data["labels"] = dict(self.labels)
        data["tags"] = list(self.tags)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def lines(self) -> list[str]:
        """The plan for people: what --dry-run prints."""
        out = [
            f"image build plan for {self.arch}",
            f"  base image   {self.base_image}",
            f"  dockerfile   {self.dockerfile} (target {self.target}), context {self.context}",
            f"  network      {'none (offline: installs only from the wheelhouse)' if self.offline else 'default'}",
            f"  wheelhouse   {self.wheelhouse or '(none: packages come from the index)'}",
            f"  tags         {', '.join(self.tags)}",
            "  build args",
        ]
        width = max(len(k) for k in self.buildargs)
        out += [f"    {k:<{width}}  {v}" for k, v in sorted(self.buildargs.items())]
        out.append("  labels")
        width = max(len(k) for k in self.labels)
        out += [f"    {k:<{width}}  {v}" for k, v in sorted(self.labels.items())]
        return out


def kernels(arch: Arch, versions: Versions, flash_attn: str) -> tuple[str, str]:
    """(flash-attn backend to build or "none", bitsandbytes version or ""): what the image compiles or
    installs beyond the training stack. The wheelhouse asks the same question."""
    if flash_attn not in FLASH_ATTN_MODES:
        raise ValueError(f"flash_attn must be one of {FLASH_ATTN_MODES}, not {flash_attn!r}")
    backend = arch.flash_attn if arch.flash_attn in ("ck", "triton") and flash_attn != "skip" else "none"
    bnb = versions.bitsandbytes if (arch.is_gpu and arch.bitsandbytes) else ""
    return backend, bnb


def flash_attn_label(arch: Arch, versions: Versions, mode: str) -> str:
    if arch.flash_attn not in ("ck", "triton"):
        return f"none (no flash-attn backend for {arch.name})"
    if mode == "skip":
        return "skipped (FLASH_ATTN=skip)"
    return f"{arch.flash_attn}-{versions.flash_attn} ({arch.pytorch_rocm_arch})"


def build_plan(arch: Arch, versions: Versions, commit: str, *, offline: bool, wheelhouse: str = "",
               context: str = ".", flash_attn: str = "auto", max_jobs: int = 4) -> BuildPlan:
    """The whole build, decided: nothing here touches Docker, the disk or the network."""
    _, bnb = kernels(arch, versions, flash_attn)
    gpu = arch.is_gpu
    # cpu: the lock's CPU torch (the arch table repeats it for readers; a unit test keeps them equal).
    torch_version = (arch.torch or "") if gpu else versions.torch_cpu
    # FLASH_ATTN_BACKEND is the arch's (the image label and self-check tell skipped from absent).
    backend = kernels(arch, versions, "auto")[0]
    ds_ops = " ".join(GPU_DS_OPS) if gpu else ""
    rocm = arch.rocm if gpu and arch.rocm else "none"
    buildargs = {
        "BASE_IMAGE": arch.base_image,
        "ARCH": arch.name,
        "PYTORCH_ROCM_ARCH": arch.pytorch_rocm_arch,
        "ROCM_VERSION": rocm,
        "PYTHON_VERSION": arch.python or "",
        # ROCm: keep (and pin) the base image's torch; cpu: the CPU wheel from the wheelhouse.
        "TORCH_FROM": "base" if gpu else "wheels",
        "TORCH_VERSION": torch_version,
        "LLAMAFACTORY_VERSION": versions.llamafactory,
        "DEEPSPEED_VERSION": versions.deepspeed,
        "DS_ACCELERATOR": "cuda" if gpu else "cpu",  # DeepSpeed's name for the CUDA/HIP accelerator
        "DS_BUILD_OPS": ds_ops,
        "FLASH_ATTN": flash_attn,
        "FLASH_ATTN_BACKEND": backend,
        "FLASH_ATTN_VERSION": versions.flash_attn,
        # flash-attn reads this at import time too, not only at build: the image keeps it in its ENV.
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE" if backend == "triton" else "FALSE",
        "FLASH_ATTN_LABEL": flash_attn_label(arch, versions, flash_attn),
        "GPU_ARCHS": arch.pytorch_rocm_arch,
        "BITSANDBYTES_VERSION": bnb,
        "BITSANDBYTES_LABEL": bnb or "none",
        "BUILD_DEPS": " ".join(versions.build_deps),
        "MAX_JOBS": str(max_jobs),
        "OFFLINE": "1" if offline else "0",
        "WHEELHOUSE": CONTEXT_WHEELHOUSE.format(arch=arch.name),
        "PROJECT_VERSION": versions.project,
        "GIT_COMMIT": commit,
    }
    labels = {
        "org.opencontainers.image.title": "rocmft",
        "org.opencontainers.image.description": f"rocmft: LLaMA-Factory fine-tuning image for {arch.name}",
        "org.opencontainers.image.version": versions.project,
        "org.opencontainers.image.revision": commit,
        "org.opencontainers.image.base.name": arch.base_image,
        LABEL_PREFIX + "version": versions.project,
        LABEL_PREFIX + "arch": arch.name,
        LABEL_PREFIX + "pytorch_rocm_arch": arch.pytorch_rocm_arch,
        LABEL_PREFIX + "rocm": rocm,
        LABEL_PREFIX + "python": arch.python or "",
        LABEL_PREFIX + "torch": torch_version,
        LABEL_PREFIX + "llamafactory": versions.llamafactory,
        LABEL_PREFIX + "deepspeed": versions.deepspeed,
        LABEL_PREFIX + "deepspeed_ops": ds_ops,
        LABEL_PREFIX + "flash_attn": buildargs["FLASH_ATTN_LABEL"],
        LABEL_PREFIX + "bitsandbytes": buildargs["BITSANDBYTES_LABEL"],
        LABEL_PREFIX + "offline": buildargs["OFFLINE"],
        # The Dockerfile runs the self-check before this label: an image that has it passed.
        LABEL_PREFIX + "selfcheck": "passed",
        LABEL_PREFIX + "commit": commit,
    }
    return BuildPlan(
        arch=arch.name,
        base_image=arch.base_image,
        dockerfile=DOCKERFILE,
        context=context,
        wheelhouse=wheelhouse,
        offline=offline,
        network_mode="none" if offline else None,
        target=TARGET,
        buildargs=MappingProxyType(buildargs),
        tags=tuple(tags(arch.name, versions.project)),
        labels=MappingProxyType(labels),
    )
