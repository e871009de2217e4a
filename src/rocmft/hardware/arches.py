"""The arch table (docker/arches.yaml) as typed data.

Read by the image build, the launcher, the planner and the renderer: one source for each arch fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ..io import paths
from ..io.problems import Problem, ProblemReport, did_you_mean
from . import versions as pins

# The Arch fields a product may set differently from its arch's first product.
PRODUCT_FIGURES = ("gpu_memory_gb", "gpus_per_node", "peak_tflops", "unified_memory")


@dataclass(frozen=True)
class Product:
    """One product of an arch: how to recognise it on a host and the figures that differ from the arch's."""
    name: str
    device_ids: tuple[int, ...] = ()  # PCI device ids (KFD's device_id)
    compute_units: int | None = None  # per device as KFD counts it (one GCD of an MI250X)
    figures: Mapping[str, Any] = field(default_factory=dict)


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
    hipblaslt: bool = False
    # Every optional package the arch's image carries: canonical pip name -> version (absent = not in the
    # image). From the table's `packages:`, versions from requirements/lock.txt or hardware/versions.py.
    image_packages: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    rccl_env: Mapping[str, str] = field(default_factory=dict)
    # Only for a run on all gpus_per_node GPUs of a single node (AMD's RCCL channel count is tuned for that).
    full_node_env: Mapping[str, str] = field(default_factory=dict)
    product: str = ""  # whose figures these are: the first of `products` unless for_product() chose another
    product_table: Mapping[str, Product] = field(default_factory=dict)
    unified_memory: bool = False  # an APU: GPU memory is the host's memory (nothing to offload to)
    integrated: bool = False  # the CPU's own GPU (Strix Halo): a training target, its memory share the host's
    # `base_image_digest: sha256:...` pins the base's content, not only its tag: the image's ID (what `docker load`
    # keeps) or its registry digest. `make image` refuses a local base that is neither (issue 43, L10).
    base_image_digest: str = ""

    @property
    def is_gpu(self) -> bool:
        return self.family != "cpu"

    @property
    def bitsandbytes(self) -> bool:
        return "bitsandbytes" in self.image_packages

    @property
    def liger_kernel(self) -> bool:
        """The arch's image ships liger-kernel (and no source says it is unsafe there)."""
        return "liger-kernel" in self.image_packages

    def for_product(self, name: str) -> Arch:
        """This arch with one product's figures; KeyError for a product the arch does not list."""
        if name not in self.products:
            raise KeyError(name)
        entry = self.product_table.get(name)
        figures = dict(entry.figures) if entry else {}
        if "peak_tflops" in figures:
            figures["peak_tflops"] = MappingProxyType(dict(figures["peak_tflops"] or {}))
        return replace(self, product=name, **figures)

    def for_calibration(self, cal: Calibration) -> Arch:
        """This arch's recipe settings planned on a calibration product's card (its memory, peak and mfu)."""
        return replace(self, product=cal.name, gpu_memory_gb=cal.gpu_memory_gb, gpus_per_node=cal.gpus_per_node,
                       peak_tflops=cal.peak_tflops, mfu=cal.mfu, unified_memory=False)

    def identify(self, device_id: int | None, compute_units: int | None = None, name: str = "") -> str | None:
        """The product a GPU of this arch is, from its PCI device id, its CU count, or a tool's marketing name;
        None when they do not single one out (then the arch's first product's figures are used)."""
        found: Iterable[Product] = self.product_table.values()
        if device_id:
            found = [p for p in found if device_id in p.device_ids]
            if len(found) > 1 and compute_units:
                found = [p for p in found if p.compute_units == compute_units]
            if len(found) == 1:
                return found[0].name
        if name:
            # the longest product name the marketing name holds, as whole words: "Radeon RX 7900 XTX" is the
            # XTX, not the XT; "AMD Instinct MI300X VF" is an MI300X
            text = f" {' '.join(name.upper().replace('/', ' ').split())} "
            named = sorted((p for p in self.products if f" {p.upper()} " in text), key=len, reverse=True)
            if named:
                return named[0]
        return None

    def peak(self, precision: str) -> float | None:
        """Dense peak TFLOP/s for a compute precision, or None when the table does not know it."""
        return self.peak_tflops.get(precision) if self.peak_tflops else None


@dataclass(frozen=True)
class Calibration:
    """A card rocmft has no image for, named so that a benchmark on it can be set beside the planner
    (docker/arches.yaml `calibration_products`)."""
    name: str
    vendor: str
    names: tuple[str, ...]
    gpu_memory_gb: float
    gpus_per_node: int
    peak_tflops: Mapping[str, float]
    mfu: tuple[float, float] | None

    def matches(self, device_name: str) -> bool:
        """Whether a device name (torch.cuda.get_device_name, nvidia-smi) is this product, as whole words."""
        text = f" {' '.join(device_name.upper().split())} "
        return any(f" {n.upper()} " in text for n in self.names)


def _build(name: str, entry: dict, defaults: dict, lock_file: Path) -> Arch:
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
        hipblaslt=bool(merged.get("hipblaslt", False)),
        image_packages=_packages(name, merged.get("flash_attn", "none"), defaults.get("packages") or {},
                                 entry.get("packages") or {}, lock_file),
        env=MappingProxyType({k: str(v) for k, v in (merged.get("env") or {}).items()}),
        rccl_env=MappingProxyType({k: str(v) for k, v in (merged.get("rccl_env") or {}).items()}),
        full_node_env=MappingProxyType({k: str(v) for k, v in (entry.get("full_node_env") or {}).items()}),
        product=(tuple(merged.get("products", ())) or ("",))[0],
        product_table=MappingProxyType({pname: _product(name, pname, spec or {}, tuple(merged.get("products", ())))
                                        for pname, spec in (entry.get("product_figures") or {}).items()}),
        unified_memory=bool(merged.get("unified_memory", False)),
        integrated=bool(merged.get("integrated", False)),
        # the digest of the base the entry names: an arch that names its own base_image never takes the default's
        base_image_digest=str(entry.get("base_image_digest", "" if "base_image" in entry
                                        else defaults.get("base_image_digest", "")) or ""),
    )


# Where a `packages:` entry's version is pinned (docker/arches.yaml explains both).
PACKAGE_SOURCES = ("lock", "versions.py")


def lock_for(table_file: Path) -> Path:
    """The lock that pins the table's `lock` packages: the one of the same checkout, else (a copy of the table
    in a project without requirements/, as tests make) the one of the checkout this code was installed from."""
    for lock in (table_file.resolve().parents[1] / "requirements" / "lock.txt",
                 Path(__file__).resolve().parents[3] / "requirements" / "lock.txt"):
        if lock.is_file():
            return lock
    raise FileNotFoundError(f"no requirements/lock.txt beside {table_file}: the table's `lock` packages need it")


def _packages(arch: str, flash_attn: str, defaults: dict, own: dict, lock_file: Path) -> Mapping[str, str]:
    """The arch's `packages:` (its own merged over the defaults; null removes one), each with its version."""
    wanted = {pins.canonical(k): v for k, v in {**defaults, **own}.items() if v is not None}
    lock: dict[str, str] | None = None
    out: dict[str, str] = {}
    for name, source in sorted(wanted.items()):
        where = f"docker/arches.yaml arches.{arch}.packages.{name}"
        if source == "versions.py":
            if name not in pins.IMAGE_PINS:
                raise ValueError(f"{where}: hardware/versions.py IMAGE_PINS has no `{name}`")
            out[name] = pins.IMAGE_PINS[name]
        elif source == "lock":
            lock = lock if lock is not None else pins.read_pins(lock_file)
            if name not in lock:
                raise ValueError(f"{where}: requirements/lock.txt has no `{name}==` pin")
            out[name] = lock[name]
        else:
            raise ValueError(f"{where}: `{source}` is not one of {', '.join(PACKAGE_SOURCES)} (or null)")
    # flash-attn is built by the kernel stage for the arch's backend: the two must agree.
    if ("flash-attn" in out) != (flash_attn in ("ck", "triton")):
        raise ValueError(f"docker/arches.yaml arches.{arch}: flash_attn `{flash_attn}` but packages "
                         f"{'has' if 'flash-attn' in out else 'lacks'} flash-attn")
    return MappingProxyType(out)


def _product(arch: str, name: str, spec: dict, products: tuple[str, ...] | None = None) -> Product:
    if products is not None and name not in products:
        raise ValueError(f"docker/arches.yaml arches.{arch}.product_figures.{name}: not in arches.{arch}.products")
    unknown = set(spec) - {"device_ids", "compute_units", *PRODUCT_FIGURES}
    if unknown:  # a typo here would silently plan with the arch's figures
        raise ValueError(f"docker/arches.yaml arches.{arch}.product_figures.{name}: unknown keys {sorted(unknown)}")
    return Product(name=name, device_ids=tuple(int(i) for i in spec.get("device_ids", ())),
                   compute_units=spec.get("compute_units"),
                   figures=MappingProxyType({k: spec[k] for k in PRODUCT_FIGURES if k in spec}))


@lru_cache(maxsize=None)
def _load(path: str) -> Mapping[str, Arch]:
    raw = yaml.safe_load(Path(path).read_text())
    defaults = raw.get("defaults", {})
    lock = lock_for(Path(path))
    return MappingProxyType({name: _build(name, entry, defaults, lock) for name, entry in raw["arches"].items()})


@lru_cache(maxsize=None)
def _load_calibration(path: str) -> Mapping[str, Calibration]:
    raw = yaml.safe_load(Path(path).read_text()).get("calibration_products") or {}
    found = {}
    for name, spec in raw.items():
        unknown = set(spec) - {"vendor", "names", "gpu_memory_gb", "gpus_per_node", "peak_tflops", "mfu"}
        if unknown:
            raise ValueError(f"docker/arches.yaml calibration_products.{name}: unknown keys {sorted(unknown)}")
        found[name] = Calibration(
            name=name, vendor=str(spec["vendor"]), names=tuple(spec.get("names") or (name,)),
            gpu_memory_gb=float(spec["gpu_memory_gb"]), gpus_per_node=int(spec.get("gpus_per_node", 1)),
            peak_tflops=MappingProxyType({k: float(v) for k, v in (spec.get("peak_tflops") or {}).items()}),
            mfu=tuple(float(v) for v in spec["mfu"]) if spec.get("mfu") else None)
    return MappingProxyType(found)


def calibration_products(path: Path | None = None) -> Mapping[str, Calibration]:
    return _load_calibration(str(path or paths.arches_file()))


def calibration_for_device(device_name: str) -> Calibration | None:
    """The calibration product a device name is, or None."""
    found = [c for c in calibration_products().values() if c.matches(device_name)]
    return found[0] if len(found) == 1 else None


def table(path: Path | None = None) -> Mapping[str, Arch]:
    return _load(str(path or paths.arches_file()))


def get(name: str, *, file: str = "", key: str = "arch") -> Arch:
    arches = table()
    if name not in arches:
        hint = did_you_mean(str(name), arches) or f"known arches: {', '.join(arches)}"
        raise ProblemReport([Problem(file, key, f"unknown arch `{name}`", hint)])
    return arches[name]
