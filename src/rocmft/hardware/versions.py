"""The versions an image is built with: read from requirements/lock.txt, plus the few pins the lock
(a freeze of the CPU venv) cannot hold because the CPU venv does not install them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..io import paths
from ..io.problems import Problem, ProblemReport

# GPU-only packages, absent from the CPU lock. flash-attn's sdist builds the CK backend (gfx90a/942/950)
# or the Triton backend (RDNA, FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE) for GPU_ARCHS.
# bitsandbytes ships ROCm binaries in its PyPI wheels from 0.49 on.
FLASH_ATTN_VERSION = "2.8.3.post2"
BITSANDBYTES_VERSION = "0.50.2"
# liger-kernel (ROCm images only, installed --no-deps so ROCm's triton stays). 0.8.2 has: the wave64 fix
# (0.4.0+, linkedin/Liger-Kernel#326: num_warps 16 instead of 32 under HIP, since 32 warps x 64 lanes
# exceeds the 1024 threads a CDNA workgroup may have - issues #231, #266); transformers 5 support (0.7.0+,
# #994: 0.6.5 still required transformers<5); and every apply_liger_kernel_to_* LLaMA-Factory 0.9.5's
# model/model_utils/liger_kernel.py imports, qwen3_5 included (0.8.0+). Its README documents ROCm 7.2 installs.
LIGER_KERNEL_VERSION = "0.8.2"
# LLaMA-Factory's optional optimizers (hparams/parser.py _check_extra_dependencies: use_galore, use_apollo, use_badam,
# use_adam_mini), in the GPU images only (the CPU venv's lock does not hold them). Each is a pure-Python wheel
# (py3-none-any) on top of torch, and each imports with transformers 5.6 (checked: `import galore_torch, apollo_torch,
# badam, adam_mini` in the CPU venv); galore_torch and apollo_torch import bitsandbytes (their 8-bit AdamW), so an
# arch without bitsandbytes leaves them out. Mixture-of-Depths is not here: no mixture-of-depth release imports with
# transformers 5.6 (1.2.0: `TRANSFORMERS_CACHE`, 1.1.6: `is_torch_fx_available`, both removed).
GALORE_TORCH_VERSION = "1.0"
APOLLO_TORCH_VERSION = "1.0.3"
BADAM_VERSION = "1.4"  # LLaMA-Factory asks for badam>=1.2.1
ADAM_MINI_VERSION = "1.1.1"
# The pins above by canonical pip name: what docker/arches.yaml's `packages: {<name>: versions.py}` resolves to.
IMAGE_PINS = {
    "flash-attn": FLASH_ATTN_VERSION,
    "bitsandbytes": BITSANDBYTES_VERSION,
    "liger-kernel": LIGER_KERNEL_VERSION,
    "galore-torch": GALORE_TORCH_VERSION,
    "apollo-torch": APOLLO_TORCH_VERSION,
    "badam": BADAM_VERSION,
    "adam-mini": ADAM_MINI_VERSION,
}
# Build backends for the project and the sdists (a py3.12 venv has no setuptools; the lock has none).
BUILD_DEPS = ("setuptools==84.2.1", "wheel==0.48.0")
# What the kernel stage adds to BUILD_DEPS, at the lock's versions: flash-attn 2.8.3's setup.py `setup_requires`
# (packaging, psutil, ninja), which --no-build-isolation never installs and setuptools would then fetch itself (an
# offline build fails on psutil: seen in CI's rehearsal; a base that has them hid it). Without a `ninja` on PATH torch's
# BuildExtension falls back to distutils, one source at a time, ignoring MAX_JOBS (flash-attn's README: "Without
# ninja, compiling can take a very long time (2h)"; at ~1,390 CK sources, our estimate is ~11 h). Cost: two
# small wheels (~0.6 MB) in the kernel stage's build venv, gone with it.
KERNEL_TOOLS = ("ninja", "packaging", "psutil")


def canonical(name: str) -> str:
    """PEP 503 name: `Jinja2`, `typing_extensions` -> `jinja2`, `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements/lock file, by canonical name (comments skipped)."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)", line)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def read_hashes(*paths: Path) -> dict[str, frozenset[str]]:
    """{canonical name: the sha256 hex digests of its pinned version's files} from `name==version --hash=sha256:...`
    lines (scripts/lock_hashes.py writes them); a pin without hashes is left out."""
    found: dict[str, frozenset[str]] = {}
    for path in paths:
        for raw in path.read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==", raw)
            digests = re.findall(r"--hash=sha256:([0-9a-f]{64})", raw)
            if match and digests:
                found[canonical(match.group(1))] = frozenset(digests)
    return found


def without_hashes(text: str) -> str:
    """A requirements file's text with its `--hash=` options taken out: pip reads a hash in a constraints file as
    hash-checking mode for every requirement (which then all need their own), so pip gets the pins alone and the
    files it fetched are checked against the hashes afterwards (image/wheelhouse.py)."""
    return re.sub(r"[ \t]+--hash=\S+", "", text)


@dataclass(frozen=True)
class Versions:
    project: str
    llamafactory: str
    deepspeed: str
    torch_cpu: str  # the CPU torch of the lock (the cpu arch's torch)
    flash_attn: str = FLASH_ATTN_VERSION
    bitsandbytes: str = BITSANDBYTES_VERSION
    liger_kernel: str = LIGER_KERNEL_VERSION
    build_deps: tuple[str, ...] = BUILD_DEPS
    kernel_tools: tuple[str, ...] = ()  # `name==version` of KERNEL_TOOLS, from the lock


def lock_file() -> Path:
    return paths.root() / "requirements" / "lock.txt"


def from_lock(path: Path | None = None) -> Versions:
    path = path or lock_file()
    pins = read_pins(path)
    missing = [name for name in ("llamafactory", "deepspeed", "torch", *KERNEL_TOOLS) if name not in pins]
    if missing:
        raise ProblemReport([
            Problem(str(path), name, "no `==` pin for it", "the image is built from the lock's exact pins")
            for name in missing
        ])
    return Versions(project=__version__, llamafactory=pins["llamafactory"], deepspeed=pins["deepspeed"],
                    torch_cpu=pins["torch"], kernel_tools=tuple(f"{n}=={pins[n]}" for n in KERNEL_TOOLS))
