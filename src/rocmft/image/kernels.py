"""The kernel stage: what the image compiles (flash-attn), with which parallelism, what its cache key is,
where the built wheel is kept on the host, and how long the compile should take.

Pure apart from `host_resources()` and the host-cache lookups (a folder listing): the dry-run shows all of it.

The stage's inputs are ONLY the fields of `KernelSpec` (+ MAX_JOBS/OFFLINE, which do not change the wheel):
docker/Dockerfile's `kernels` stage declares no other ARG and COPYs only the context's `kernels/` folder,
which holds nothing but the host-kept wheel, or the flash-attn sdist and its build tools and, for a CK compile,
the probe it runs first (kernel_probe.py: one source in seconds before ~1,400 in minutes to hours)
(tests/unit/image/test_kernels.py checks both on the Dockerfile and the context, as data).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..hardware.arches import Arch
from ..hardware.versions import Versions

# Where the context carries the kernel stage's only inputs, and where the image keeps the stage's record.
CONTEXT_KERNELS = "kernels"
# The probe a CK compile runs first (kernel_probe.py): sent in that folder, so it is part of the stage's key (changing
# it reruns the stage; `make image` then reuses the host-kept wheel, no compile).
PROBE = Path(__file__).with_name("kernel_probe.py")
PROBE_SOURCE = "csrc/flash_attn_ck/mha_fwd"
RECORD_IN_IMAGE = "/opt/rocmft/kernels.json"
STAGE = "kernels"

# flash-attn 2.8.3 setup.py, NinjaBuildExtension: with MAX_JOBS unset it takes min(cpu_count // 2,
# available RAM in GiB / 9) ("each JOB peak memory cost is ~8-9GB when threads = 4"), at least 1.
GIB_PER_JOB = 9

# flash-attn 2.8.3 setup.py runs CK's generator with `--optdim $OPT_DIM` (default "32,64,128,256") for every
# op (fwd, fwd_appendkv, fwd_splitkv, bwd): OPT_DIM is the head-dim restriction it supports.
ALL_HEAD_DIMS = (32, 64, 128, 256)

# Figures for the estimate (docs/image.md, "How long will it take"):
# - CK kernel sources per arch, counted by running the CK generator of the flash-attn 2.8.3.post2 sdist (the one the
#   kernel stage builds) as its setup.py does: benchmarks/ck_kernel_count.py. 2,775 for all four head dims (as
#   issue 22 reported), 1,390 for 64,128; other subsets scale the full count by the share of head dims kept
#   (the measured 64,128 share is 0.501).
# - ROCm/Megatron-LM PR #82 (not measured here): the flash-attn step took 636 s with MAX_JOBS=128 (1,740 s with
#   the default). 636 s x 128 jobs / 2,775 sources ~ 29 job-seconds per source: perfect scaling assumed, so a
#   host with fewer jobs is estimated by dividing by its MAX_JOBS.
CK_SOURCES_ALL_DIMS = 2775
CK_SOURCES_MEASURED = {ALL_HEAD_DIMS: CK_SOURCES_ALL_DIMS, (64, 128): 1390}
JOB_SECONDS_PER_SOURCE = 636 * 128 / CK_SOURCES_ALL_DIMS


def model_head_dims() -> tuple[int, ...]:
    """Head dims of every model in the planner's table (src/rocmft/plan/models.yaml), the models the
    shipped recipes use: flash-attn needs a kernel for each."""
    from ..plan import models

    dims = {spec.head_dim for spec in (models.from_table(n) for n in models.table_names()) if spec is not None}
    return tuple(sorted(dims))


def head_dims_for_build(setting: str = "") -> tuple[tuple[int, ...], str]:
    """(head dims to compile, why). "" = the model table's dims rounded up to flash-attn's generator dims;
    "all" = every dim; else a comma list of flash-attn's dims."""
    if setting.strip().lower() == "all":
        return ALL_HEAD_DIMS, "all (HEAD_DIMS=all)"
    if setting.strip():
        dims = tuple(sorted({int(d) for d in setting.replace(" ", "").split(",") if d}))
        bad = [d for d in dims if d not in ALL_HEAD_DIMS]
        if bad:
            raise ValueError(f"HEAD_DIMS: {bad} not among flash-attn 2.8.3's generator dims {ALL_HEAD_DIMS}")
        return dims, f"HEAD_DIMS={setting}"
    wanted = model_head_dims()
    # A kernel for dim D serves head dims up to D (CK pads): the smallest generator dim >= each model's.
    dims = tuple(sorted({next((g for g in ALL_HEAD_DIMS if g >= d), ALL_HEAD_DIMS[-1]) for d in wanted}))
    return dims, f"the planner's model table uses head dims {', '.join(map(str, wanted))} (HEAD_DIMS=all for every dim)"


@dataclass(frozen=True)
class MaxJobs:
    value: int
    why: str


def host_resources() -> tuple[int, int]:
    """(CPUs, available RAM in bytes) of this host: what `docker build` containers see too."""
    cpus = os.cpu_count() or 1
    available = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        pass
    return cpus, available


def max_jobs(cpus: int, available_bytes: int, override: int | None = None) -> MaxJobs:
    """flash-attn's own rule of thumb (see GIB_PER_JOB), unless MAX_JOBS= says otherwise."""
    if override is not None:
        return MaxJobs(override, "MAX_JOBS set by you")
    gib = available_bytes / 1024 ** 3
    by_cores = max(1, cpus // 2)
    by_memory = int(gib / GIB_PER_JOB)
    value = max(1, min(by_cores, by_memory))
    limit = "memory" if by_memory < by_cores else "cores"
    return MaxJobs(value, f"flash-attn's rule: min({cpus} CPUs / 2 = {by_cores}, {gib:.0f} GiB free / "
                          f"{GIB_PER_JOB} GiB per job = {by_memory}), limited by {limit}; override with MAX_JOBS=")


@dataclass(frozen=True)
class KernelSpec:
    """Everything the compiled wheel depends on: the kernel stage's cache key, and the host cache's."""
    base_image: str  # the base image's id (sha256:...) when known, else its reference
    backend: str  # ck | triton | none
    version: str  # flash-attn's
    gpu_archs: str  # GPU_ARCHS
    head_dims: tuple[int, ...]

    @property
    def compiles(self) -> bool:
        return self.backend == "ck"  # the Triton backend is Python; JIT on first use

    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_for(arch: Arch, versions: Versions, backend: str, head_dims: tuple[int, ...], base_id: str = "") -> KernelSpec:
    return KernelSpec(base_image=base_id or arch.base_image, backend=backend,
                      version=versions.flash_attn if backend != "none" else "",
                      gpu_archs=arch.pytorch_rocm_arch if backend != "none" else "",
                      head_dims=head_dims if backend == "ck" else ())


def sources_estimate(spec: KernelSpec) -> int:
    if not spec.compiles:
        return 0
    if spec.head_dims in CK_SOURCES_MEASURED:
        return CK_SOURCES_MEASURED[spec.head_dims]
    return round(CK_SOURCES_ALL_DIMS * len(spec.head_dims) / len(ALL_HEAD_DIMS))


def seconds_estimate(spec: KernelSpec, jobs: int) -> float:
    return sources_estimate(spec) * JOB_SECONDS_PER_SOURCE / max(1, jobs)


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# --- the host cache: wheelhouse/<arch>/kernels/<key>/ -------------------------------------------------

def cache_folder(wheelhouse_folder: Path, spec: KernelSpec) -> Path:
    """Kept inside the arch's wheelhouse, so copying wheelhouse/<arch>/ to an air-gapped host carries it."""
    return wheelhouse_folder / CONTEXT_KERNELS / spec.key()


def cached_wheels(wheelhouse_folder: Path, spec: KernelSpec) -> list[Path]:
    folder = cache_folder(wheelhouse_folder, spec)
    return sorted(folder.glob("*.whl")) if folder.is_dir() else []


def estimate_line(spec: KernelSpec, jobs: MaxJobs, cached: list[Path], head_why: str = "") -> str:
    if spec.backend == "none":
        return "kernel stage: no compiled kernel for this arch (records that, and is cached from then on)"
    if cached:
        return f"kernel stage: reuses the host-kept wheel {cached[0].name} (no compile)"
    if not spec.compiles:
        return f"kernel stage: flash-attn {spec.backend} backend is Python (Triton JIT): a pip wheel, seconds"
    n = sources_estimate(spec)
    return (f"kernel stage: a probe compiles {PROBE_SOURCE} alone first (stops in seconds when the base's torch "
            f"cannot build it), then ~{n} CK sources (head dims {','.join(map(str, spec.head_dims))}) / MAX_JOBS {jobs.value}"
            f" ~ {fmt_duration(seconds_estimate(spec, jobs.value))} (rough, scaled from ROCm/Megatron-LM PR #82; "
            "none if the base image already has it)")
