"""CI's rehearsal of the ROCm images: docker/Dockerfile's ROCm branch (TORCH_FROM=base) built for real on a CPU base.

No ROCm base image and no GPU are reachable in CI, so two things stand in, and nothing else changes:
- the base: `rocmft-base:cpu` plus a venv at /opt/venv (on PATH, as the ROCm base's python3 is a venv) holding
  the lock's CPU torch and torchaudio, PyPI's triton for that torch (standing in for ROCm's pytorch-triton-rocm:
  liger-kernel's kernels import it), and torchvision's metadata only (no CPU torchvision wheel is reachable, and
  pip must see LLaMA-Factory's torchvision requirement met, as the ROCm base's own build meets it);
- flash-attn: the kernel stage builds the Triton backend's pure-Python wheel from the sdist for gfx1100, as a ROCm
  build would, and gfx942 gets that wheel as its host-kept kernel wheel instead of the CK compile.

So every line of the ROCm branch runs except the CK compile and the checks that need HIP, which REHEARSAL=1 skips
by name (the deps stage's `torch.version.hip` assert; DeepSpeed's install, whose setup.py requires nvidia-ml-py for
the `cuda` accelerator unless torch is a ROCm build, runs with DS_ACCELERATOR=cpu; selfcheck.REHEARSAL_SKIPS). Both arches are built from one
wheelhouse folder (the cpu wheelhouse plus what only GPU images install), so they share the venv and LLaMA-Factory
layers. The images are tagged `rocmft-rehearsal:<arch>` and labelled `ai.rocmft.rehearsal=1`: never `rocmft:<arch>`,
never found by `find_image`, never run by `make train`.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from ..hardware import arches
from ..hardware.versions import Versions, canonical
from ..io import paths
from ..io.problems import Problem, ProblemReport
from . import build, kernels
from .names import LABEL_PREFIX
from .plan import BuildPlan, build_plan, image_packages
from .wheelhouse import kernel_sources

REPOSITORY = "rocmft-rehearsal"
BASE = "rocmft-rehearsal-base:cpu"
# The Triton arch first: its kernel stage builds the flash-attn wheel that stands in for the CK arch's compile.
ARCHES = ("gfx1100", "gfx942")
CONTEXT_WHEELHOUSE = "wheelhouse/rehearsal"
# The triton PyPI's torch 2.13.0 (the lock's CPU torch) requires on Linux (its wheel metadata:
# `triton==3.7.1; platform_system == "Linux"`): the stand-in for the ROCm base's pytorch-triton-rocm.
TRITON = "triton==3.7.1"
# What the rehearsal base installs into /opt/venv from the wheelhouse (torch and torchaudio at the lock's pins).
BASE_PINNED = ("torch", "torchaudio")
BASE_DOCKERFILE = """\
FROM {cpu_base} AS install
COPY wheels/ /wheels/
RUN set -eux; \\
    python3 -m venv /opt/venv; \\
    /opt/venv/bin/python -m pip install --no-cache-dir --no-index --find-links /wheels {pins} {triton}; \\
    /opt/venv/bin/python -m pip install --no-cache-dir --no-index --find-links /wheels --no-deps {torchvision}; \\
    site=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \\
    rm -rf "$site/torchvision" "$site/torchvision.libs" "$site"/torchaudio/lib/*.so; \\
    /opt/venv/bin/python -c 'import torch, torchaudio, triton; print("rehearsal base: torch", torch.__version__)'

FROM {cpu_base}
COPY --from=install /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL ai.rocmft.rehearsal="1"
"""


def folder() -> Path:
    return paths.root() / "wheelhouse" / "rehearsal"


def tag(arch: str) -> str:
    return f"{REPOSITORY}:{arch}"


def gpu_only_pins(versions: Versions) -> list[str]:
    """What the rehearsed arches' images install that the cpu wheelhouse lacks (liger-kernel, bitsandbytes, the
    flash-attn sdist), and the triton stand-in."""
    table = arches.table()
    cpu = set(image_packages(table["cpu"]))
    wanted = {n: v for a in ARCHES for n, v in image_packages(table[a]).items() if n not in cpu}
    return sorted(f"{n}=={v}" for n, v in wanted.items()) + [TRITON]


def _have(where: Path, pin: str) -> bool:
    from .wheelhouse import parse_filename

    name, version = pin.split("==")
    return any(parse_filename(p.name) == (canonical(name), version) for p in where.iterdir())


def prepare_wheelhouse(versions: Versions, cpu_folder: Path, dest: Path, *, out=sys.stdout) -> Path:
    """dest = the cpu wheelhouse (hard links) + gpu_only_pins, downloaded once (pip download --no-deps, for the
    rehearsal base's Python: the cpu image's, 3.11). The only step that needs the network."""
    files = [p for p in cpu_folder.iterdir() if p.is_file() and not p.name.startswith(".")] if cpu_folder.is_dir() else []
    if not files:
        raise ProblemReport([Problem(str(cpu_folder), "", "the cpu wheelhouse is missing or empty",
                                     "run `make wheelhouse ARCH=cpu` first")])
    dest.mkdir(parents=True, exist_ok=True)
    for path in files:
        target = dest / path.name
        if not target.exists():
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)
    missing = [p for p in gpu_only_pins(versions) if not _have(dest, p)]
    pip = (sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--dest", str(dest))
    sdists = [p for p in missing if p.startswith("flash-attn==")]
    wheels = [p for p in missing if p not in sdists]
    # flash-attn's setup.py runs even to prepare metadata: no build isolation (a CUDA torch), no compile.
    from .wheelhouse import ROCM_PLATFORMS

    target = ("--python-version", arches.table()["cpu"].python or "3.11", "--implementation", "cp",
              *(arg for plat in ROCM_PLATFORMS for arg in ("--platform", plat)))
    commands = ([(*pip, "--only-binary", ":all:", *target, *wheels)] if wheels else []) + \
               ([(*pip, "--no-binary", ":all:", "--no-build-isolation", *sdists)] if sdists else [])
    for cmd in commands:
        print(f"==> pip download (rehearsal): {' '.join(p for p in cmd if '==' in p)}", file=out, flush=True)
        proc = subprocess.run(cmd, env={**os.environ, "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"},
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ProblemReport([Problem(str(dest), "", f"pip download failed: {proc.stderr.strip()[-400:]}",
                                         "check the pins and that PyPI is reachable")])
    return dest


def _pin(versions_lock: dict[str, str], name: str) -> str:
    return f"{name}=={versions_lock[name]}"


def base_context(cpu_base: str, wheels: Path) -> tuple[str, list[Path]]:
    """The rehearsal base's Dockerfile text and the wheels its context carries (all of the wheelhouse's)."""
    from ..hardware.versions import lock_file, read_pins
    from .wheelhouse import parse_filename

    lock = read_pins(lock_file())
    found = {parse_filename(p.name)[0]: parse_filename(p.name)[1] for p in wheels.glob("*.whl") if parse_filename(p.name)}
    if "torchvision" not in found:
        raise ProblemReport([Problem(str(wheels), "torchvision", "no torchvision wheel (its metadata stands in)",
                                     "run `make wheelhouse ARCH=cpu`")])
    text = BASE_DOCKERFILE.format(cpu_base=cpu_base, pins=" ".join(_pin(lock, n) for n in BASE_PINNED), triton=TRITON,
                                  torchvision=f"torchvision=={found['torchvision']}")
    return text, sorted(wheels.glob("*.whl"))


def build_base(client, wheels: Path, log_path: Path, *, out=sys.stdout) -> build.BuildResult:
    """The rehearsal base, offline (no network in the build), tagged BASE."""
    from .docker_api import require_base

    cpu_base = arches.table()["cpu"].base_image
    require_base(client, cpu_base, offline=True, arch="cpu")
    text, files = base_context(cpu_base, wheels)
    with tempfile.TemporaryFile(prefix="rocmft-rehearsal-base-") as ctx, open(log_path, "w") as log:
        with tarfile.open(fileobj=ctx, mode="w") as tar:
            data = text.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for path in files:
                tar.add(str(path), arcname=f"wheels/{path.name}")
        ctx.seek(0)
        events = client.api.build(fileobj=ctx, custom_context=True, tag=BASE, network_mode="none", pull=False,
                                  rm=True, forcerm=True, decode=True)
        result = build.consume(events, build.StepDisplay(out), log)
    result.log = str(log_path)
    return result


def plan_for(arch: arches.Arch, versions: Versions, commit: str, wheels: Path, *, base_id: str = "",
             kernel_wheel: Path | None = None) -> BuildPlan:
    """`make image ARCH=<arch> OFFLINE=1`'s plan with only the stand-ins swapped: the base, its torch and Python,
    REHEARSAL=1, the shared wheelhouse folder, the Triton flash-attn wheel (a CK arch gets it as its host-kept
    wheel: `kernel_wheel`), and the rehearsal's tag and labels."""
    plan = build_plan(arch, versions, commit, offline=True, wheelhouse=str(wheels), context=str(paths.root()),
                      base_id=base_id, kernel_cache_root=str(wheels),
                      kernel_sources=kernel_sources(wheels, versions), max_jobs=kernels.MaxJobs(1, "rehearsal"))
    cpu = arches.table()["cpu"]
    args = {
        **plan.buildargs,
        "BASE_IMAGE": BASE,
        "TORCH_VERSION": versions.torch_cpu,  # the stand-in's, checked against the base as the ROCm torch would be
        "PYTHON_VERSION": cpu.python or "",
        "ROCM_VERSION": "none (rehearsal: CPU torch)",
        "REHEARSAL": "1",
        "WHEELHOUSE": CONTEXT_WHEELHOUSE,
        # The flash-attn installed is the Triton backend's wheel for every rehearsed arch (a CK arch's included):
        # flash-attn reads this at import to pick it.
        "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE",
    }
    labels = {
        **plan.labels,
        "org.opencontainers.image.base.name": BASE,
        LABEL_PREFIX + "torch": versions.torch_cpu,
        LABEL_PREFIX + "python": cpu.python or "",
        LABEL_PREFIX + "rocm": args["ROCM_VERSION"],
        LABEL_PREFIX + "rehearsal": "1",
    }
    # A Triton arch always builds its wheel from the sdist (that is the line rehearsed; Docker caches it), never
    # reusing the kept one; a CK arch gets that wheel as its host-kept kernel wheel.
    wheels_kept = (str(kernel_wheel),) if kernel_wheel and arch.flash_attn == "ck" else ()
    sources = () if wheels_kept else kernel_sources(wheels, versions)
    return dataclasses.replace(plan, base_image=BASE, buildargs=MappingProxyType(args), labels=MappingProxyType(labels),
                               tags=(tag(arch.name),), kernel_wheels=wheels_kept, kernel_sources=sources)


def triton_wheel(wheels: Path, versions: Versions) -> Path | None:
    """The flash-attn Triton wheel a rehearsal kernel stage built and `keep_kernel_wheel` kept (py3-none-any)."""
    found = sorted((wheels / kernels.CONTEXT_KERNELS).glob(f"*/flash_attn-{versions.flash_attn}-py3-none-any.whl"))
    return found[-1] if found else None


def run(client, versions: Versions, commit: str, wheels: Path, *, names=ARCHES, out=sys.stdout) -> dict[str, float]:
    """Build the base, then each rehearsal image (Triton arch first); seconds per build. Raises on a failure."""
    logs = paths.cache_dir()
    timings: dict[str, float] = {}
    started = time.monotonic()
    print(f"==> rehearsal base {BASE} (rocmft-base:cpu + CPU torch, torchaudio, {TRITON} in /opt/venv)", file=out, flush=True)
    result = build_base(client, wheels, logs / "rehearsal-base.log", out=out)
    if not result.ok:
        print("\n".join(build.failed_step_lines(result)), file=out)
        raise ProblemReport([Problem(BASE, "", result.error or "the base build failed", f"full log: {result.log}")])
    timings["base"] = time.monotonic() - started
    base_id = client.images.get(BASE).id
    table = arches.table()
    for name in sorted(names, key=lambda n: table[n].flash_attn == "ck"):
        arch = table[name]
        plan = plan_for(arch, versions, commit, wheels, base_id=base_id, kernel_wheel=triton_wheel(wheels, versions))
        if arch.flash_attn == "ck" and not plan.kernel_wheels:
            raise ProblemReport([Problem(name, "flash-attn", "no Triton flash-attn wheel to stand in for the CK compile",
                                         "rehearse a Triton arch first (gfx1100)")])
        print(f"==> rehearsal {plan.tags[0]} (the {name} build on {BASE}, REHEARSAL=1)", file=out, flush=True)
        started = time.monotonic()
        result = build.run(client, plan, log_path=logs / f"rehearsal-{name}.log", out=out)
        if not result.ok:
            print("\n".join(build.failed_step_lines(result)), file=out)
            raise build.failure_report(result, plan, "make rehearsal")
        record, kept = build.keep_kernel_wheel(client, plan, result)
        print(build.kernel_line(record, kept, result.stage(kernels.STAGE)), file=out)
        timings[name] = time.monotonic() - started
        print(f"==> {plan.tags[0]} built in {build._fmt_seconds(timings[name])} "
              f"({result.cached} of {result.steps} steps cached)", file=out, flush=True)
    return timings
