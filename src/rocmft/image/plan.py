"""The image build plan: a pure function of (arch, versions, commit, offline, wheelhouse).

Everything `make image` sends to Docker comes from here, so `--dry-run` shows exactly what a build
would do, and the unit tests pin it per arch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..hardware.arches import Arch
from ..hardware.versions import Versions
from . import kernels as kernel_stage
from .kernels import KernelSpec, MaxJobs
from .names import LABEL_PREFIX, tags

DOCKERFILE = "docker/Dockerfile"
TARGET = "image"
# Where the wheelhouse sits inside the build context (whatever folder it came from on the host).
CONTEXT_WHEELHOUSE = "wheelhouse/{arch}"
# No DeepSpeed op is prebuilt. FUSED_ADAM would only load for a DeepSpeed config with an `optimizer` block,
# and no shipped ds_configs/*.json has one: the HF Trainer passes its own torch AdamW (docs/image.md).
# CPU_ADAM never: DeepSpeed's op_builder/builder.py compiles CPU ops with -march=native and the SIMD flags
# of the machine running `docker build` (DeepSpeed issue #1886), so a prebuilt one can die with an illegal
# instruction on a run host without AVX-512. It JIT-compiles on the run host (the base has the toolchain;
# TORCH_EXTENSIONS_DIR caches it), once, on the first offload run.
DEEPSPEED_OPS_LABEL = "none (JIT-compiled on first use)"
FLASH_ATTN_MODES = ("auto", "skip")
# Table packages installed by a step of their own: DeepSpeed (an sdist built against the image's torch,
# DEEPSPEED_VERSION) and flash-attn (the kernel stage, FLASH_ATTN_VERSION). The rest go in PACKAGES.
OWN_STEP = ("deepspeed", "flash-attn")
# Installed --no-deps: liger-kernel's metadata requires `triton`; with its deps pip would put PyPI's (CUDA) triton
# over the ROCm base's own (pytorch-triton-rocm), which is what Liger's kernels must run on. Its other
# requirement, torch, is the base's. (shared/notes/facts.md; liger-kernel 0.8.2 setup.py install_requires)
NO_DEPS = ("liger-kernel",)


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
    # The kernel stage: its cache key, the host folder its wheel is kept in, and the wheels found there.
    kernel: KernelSpec | None = None
    max_jobs: MaxJobs = MaxJobs(1, "")
    head_dims_why: str = ""
    kernel_cache: str = ""  # wheelhouse/<arch>/kernels/<key>/ on the host
    kernel_wheels: tuple[str, ...] = ()  # host-kept wheels the kernel stage reuses (none: it builds)
    kernel_sources: tuple[str, ...] = ()  # offline: the flash-attn sdist + build tools from the wheelhouse

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["buildargs"] = dict(self.buildargs)
        data["labels"] = dict(self.labels)
        data["tags"] = list(self.tags)
        data["kernel"] = {**asdict(self.kernel), "key": self.kernel.key()} if self.kernel else None
        data["max_jobs"] = asdict(self.max_jobs)
        data["kernel_wheels"] = list(self.kernel_wheels)
        data["kernel_sources"] = list(self.kernel_sources)
        return data

    def estimate(self) -> str:
        """The kernel stage's expected cost, printed before a build starts."""
        if self.kernel is None:
            return ""
        return kernel_stage.estimate_line(self.kernel, self.max_jobs, [Path(w) for w in self.kernel_wheels],
                                          self.head_dims_why)

    def kernel_lines(self) -> list[str]:
        k = self.kernel
        if k is None:
            return []
        dims = ",".join(map(str, k.head_dims)) if k.head_dims else "-"
        return [
            f"  kernel stage `{kernel_stage.STAGE}` (built once; its cache key is only these inputs)",
            f"    base image   {k.base_image}",
            f"    kernel       flash-attn {k.version or '-'} backend {k.backend}, GPU_ARCHS {k.gpu_archs or '-'}",
            f"    head dims    {dims}" + (f"  ({self.head_dims_why})" if k.compiles else ""),
            f"    MAX_JOBS     {self.max_jobs.value}" + (f"  ({self.max_jobs.why})" if k.compiles else "  (nothing to compile)"),
            f"    key          {k.key()}  (never lock.txt, src/, recipes/)",
            f"    host cache   {self.kernel_cache or '-'}"
            + (f": {', '.join(Path(w).name for w in self.kernel_wheels)}" if self.kernel_wheels else ""),
            "    " + self.estimate(),
            f"  deepspeed ops  {DEEPSPEED_OPS_LABEL}",
        ]

    def package_lines(self) -> list[str]:
        """The arch table's packages this image installs, each with its version and how it gets in."""
        words = [w.split("==", 1) for w in self.buildargs.get("IMAGE_PACKAGES", "").split()]
        if not words:
            return []
        no_deps = {w.split("==", 1)[0] for w in self.buildargs.get("PACKAGES_NO_DEPS", "").split()}
        how = {"deepspeed": "sdist, built against the image's torch", "flash-attn": "the kernel stage's wheel"}
        width = max(len(n) for n, _ in words)
        out = [f"  packages (docker/arches.yaml {self.arch})"]
        out += [f"    {n:<{width}}  {v:<12} {how.get(n, 'pip --no-deps (keeps the base triton)' if n in no_deps else 'pip')}"
                for n, v in words]
        return out

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
            *self.kernel_lines(),
            *self.package_lines(),
            "  build args",
        ]
        width = max(len(k) for k in self.buildargs)
        out += [f"    {k:<{width}}  {v}" for k, v in sorted(self.buildargs.items())]
        out.append("  labels")
        width = max(len(k) for k in self.labels)
        out += [f"    {k:<{width}}  {v}" for k, v in sorted(self.labels.items())]
        return out


def kernels(arch: Arch, versions: Versions, flash_attn: str) -> tuple[str, str]:
    """(flash-attn backend to build or "none", bitsandbytes version or ""): what the image compiles, and
    whether the arch table's packages hold bitsandbytes."""
    if flash_attn not in FLASH_ATTN_MODES:
        raise ValueError(f"flash_attn must be one of {FLASH_ATTN_MODES}, not {flash_attn!r}")
    backend = arch.flash_attn if "flash-attn" in arch.image_packages and flash_attn != "skip" else "none"
    return backend, arch.image_packages.get("bitsandbytes", "")


def image_packages(arch: Arch, flash_attn: str = "auto") -> dict[str, str]:
    """The arch table's packages this build installs (flash-attn left out by FLASH_ATTN=skip)."""
    if flash_attn not in FLASH_ATTN_MODES:
        raise ValueError(f"flash_attn must be one of {FLASH_ATTN_MODES}, not {flash_attn!r}")
    return {name: version for name, version in sorted(arch.image_packages.items())
            if not (name == "flash-attn" and flash_attn == "skip")}


def pins(packages: Mapping[str, str], names=None) -> str:
    """`name==version` words (a build arg the Dockerfile splits), for the given names or all."""
    return " ".join(f"{n}=={v}" for n, v in sorted(packages.items()) if names is None or n in names)


def label_key(package: str) -> str:
    """`liger-kernel` -> `ai.rocmft.liger_kernel`: the per-package label."""
    return LABEL_PREFIX + package.replace("-", "_")


def flash_attn_label(arch: Arch, versions: Versions, mode: str) -> str:
    if arch.flash_attn not in ("ck", "triton"):
        return f"none (no flash-attn backend for {arch.name})"
    if mode == "skip":
        return "skipped (FLASH_ATTN=skip)"
    return f"{arch.flash_attn}-{versions.flash_attn} ({arch.pytorch_rocm_arch})"


def build_plan(arch: Arch, versions: Versions, commit: str, *, offline: bool, wheelhouse: str = "",
               context: str = ".", flash_attn: str = "auto", max_jobs: MaxJobs | int = 1, head_dims: str = "",
               base_id: str = "", kernel_cache_root: str = "", kernel_sources: tuple[str, ...] = ()) -> BuildPlan:
    """The whole build, decided: nothing here touches Docker or the network (the host cache is a listing).
    kernel_cache_root: the arch's wheelhouse folder, whose kernels/<key>/ keeps the compiled wheel;
    kernel_sources: host files the kernel stage may compile from (offline: the flash-attn sdist, build tools)."""
    built_backend, bnb = kernels(arch, versions, flash_attn)
    packages = image_packages(arch, flash_attn)
    pip_installed = [n for n in packages if n not in OWN_STEP]
    jobs = max_jobs if isinstance(max_jobs, MaxJobs) else MaxJobs(max_jobs, "given")
    dims, dims_why = kernel_stage.head_dims_for_build(head_dims)
    spec = kernel_stage.spec_for(arch, versions, built_backend, dims, base_id)
    if not spec.compiles:
        jobs = MaxJobs(0, "nothing to compile")
    cache = kernel_stage.cache_folder(Path(kernel_cache_root), spec) if kernel_cache_root else None
    wheels = tuple(str(p) for p in kernel_stage.cached_wheels(Path(kernel_cache_root), spec)) if cache else ()
    gpu = arch.is_gpu
    # cpu: the lock's CPU torch (the arch table repeats it for readers; a unit test keeps them equal).
    torch_version = (arch.torch or "") if gpu else versions.torch_cpu
    # FLASH_ATTN_BACKEND is the arch's (the image label and self-check tell skipped from absent).
    backend = kernels(arch, versions, "auto")[0]
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
        "FLASH_ATTN": flash_attn,
        "FLASH_ATTN_BACKEND": backend,
        "FLASH_ATTN_VERSION": versions.flash_attn,
        # flash-attn reads this at import time too, not only at build: the image keeps it in its ENV.
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE" if backend == "triton" else "FALSE",
        "FLASH_ATTN_LABEL": flash_attn_label(arch, versions, flash_attn),
        "GPU_ARCHS": arch.pytorch_rocm_arch,
        "BITSANDBYTES_LABEL": bnb or "none",
        # The arch table's packages (docker/arches.yaml `packages:`): all of them for the self-check and the
        # `ai.rocmft.packages` label; pip installs PACKAGES (held to the lock) and PACKAGES_NO_DEPS.
        "IMAGE_PACKAGES": pins(packages),
        "PACKAGES": pins(packages, [n for n in pip_installed if n not in NO_DEPS]),
        "PACKAGES_NO_DEPS": pins(packages, [n for n in pip_installed if n in NO_DEPS]),
        "LIGER_KERNEL_LABEL": packages.get("liger-kernel", "none"),
        "BUILD_DEPS": " ".join(versions.build_deps),
        # The kernel stage's inputs (with BASE_IMAGE, FLASH_ATTN_VERSION, GPU_ARCHS, BUILD_DEPS, OFFLINE).
        "KERNEL_TOOLS": " ".join(versions.kernel_tools),
        "KERNEL_BACKEND": spec.backend,
        "FLASH_ATTN_HEAD_DIMS": ",".join(map(str, dims)) if spec.compiles else "",
        "MAX_JOBS": str(jobs.value),
        "OFFLINE": "1" if offline else "0",
        # 1 only in CI's rehearsal of a ROCm image on a CPU base (image/rehearsal.py), never in a rocmft:<arch> image.
        "REHEARSAL": "0",
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
        LABEL_PREFIX + "deepspeed_ops": DEEPSPEED_OPS_LABEL,
        LABEL_PREFIX + "flash_attn": buildargs["FLASH_ATTN_LABEL"],
        LABEL_PREFIX + "bitsandbytes": buildargs["BITSANDBYTES_LABEL"],
        label_key("liger-kernel"): buildargs["LIGER_KERNEL_LABEL"],
        LABEL_PREFIX + "packages": buildargs["IMAGE_PACKAGES"],
        LABEL_PREFIX + "offline": buildargs["OFFLINE"],
        LABEL_PREFIX + "rehearsal": buildargs["REHEARSAL"],
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
        kernel=spec,
        max_jobs=jobs,
        head_dims_why=dims_why,
        kernel_cache=str(cache) if cache else "",
        kernel_wheels=wheels,
        kernel_sources=() if wheels or spec.backend == "none" else tuple(kernel_sources),
    )
