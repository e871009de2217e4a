"""`make wheelhouse ARCH=...`: download every package the image installs into one folder, so that
`make image ARCH=... OFFLINE=1` builds with no network at all; and the check that a wheelhouse is
complete before an offline build (a missing wheel is named, not found out 5 minutes into the build).

- cpu: the lock resolved for real (`pip download`, same Python as the image's: 3.11), CPU torch included.
- ROCm arches: every pin of the lock except torch/torchvision/torchaudio (the base image's are kept),
  fetched `--no-deps` for the image's Python (3.12) and platform, plus the arch table's packages (the
  DeepSpeed and flash-attn sdists, liger-kernel, bitsandbytes). Never torch: a torch in a ROCm wheelhouse is reported as an error.
- Every file of a pin the lock hashes (requirements/lock.txt, no-deps.txt: scripts/lock_hashes.py) must be one
  of PyPI's files of that version, checked after the download and again before every offline build: an
  offline image installs nothing else (issue 43, L10). pip gets the pins without their hashes (it reads a hash
  in a constraints file as hash-checking mode for every requirement), from a copy in the folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..hardware.arches import Arch
from ..hardware.versions import Versions, canonical, read_hashes, read_pins, without_hashes
from ..io.problems import Problem, ProblemReport
from .kernels import file_sha256
from .plan import image_packages

MANIFEST = "rocmft-wheelhouse.json"
CONSTRAINTS = ".constraints.txt"  # the lock without its hashes, for pip (hidden: never sent with the build context)
# Never in a ROCm wheelhouse: the base image's torch stack stays, and nothing CUDA gets in.
ROCM_EXCLUDED = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm")
CUDA_PREFIXES = ("nvidia-",)
# glibc of the ROCm base images (Ubuntu 24.04): 2.39. pip does not widen a `--platform manylinux_2_39`
# to the older tags the image also runs, so every one is listed (plus the legacy aliases).
ROCM_GLIBC_MINOR = 39
ROCM_PLATFORMS = (*(f"manylinux_2_{m}_x86_64" for m in range(ROCM_GLIBC_MINOR, 4, -1)),
                  "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
# Sources the image builds with --no-build-isolation (an isolated build would fetch a CUDA torch).
NO_ISOLATION_SDISTS = ("deepspeed", "flash-attn")


@dataclass(frozen=True)
class WheelhousePlan:
    arch: str
    folder: str
    python: str  # the image's Python (major.minor) the wheels are for
    commands: tuple[tuple[str, ...], ...]
    env: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()  # name==version the image installs directly
    forbidden: tuple[str, ...] = ()  # canonical names (or prefixes ending in -) that must not be there
    hashes: Mapping[str, frozenset[str]] = field(default_factory=dict)  # canonical name -> its files' sha256
    lock: str = ""  # the lock whose pins, without hashes, pip is constrained by (CONSTRAINTS)

    def lines(self) -> list[str]:
        out = [f"wheelhouse plan for {self.arch} (Python {self.python}) -> {self.folder}"]
        out += ["  " + " ".join(cmd[:12]) + (" ..." if len(cmd) > 12 else "") for cmd in self.commands]
        out.append(f"  required: {', '.join(self.required)}")
        if self.forbidden:
            out.append(f"  never: {', '.join(self.forbidden)}")
        return out


def required_pins(arch: Arch, versions: Versions, train: Path, flash_attn: str = "auto") -> list[str]:
    """What the Dockerfile asks for by name: train.txt, the build deps, the arch table's packages (deepspeed,
    flash-attn, liger-kernel, bitsandbytes, ...: image.plan.image_packages), the cpu torch."""
    pins = [f"{name}=={version}" for name, version in read_pins(train).items()]
    named = set(read_pins(train))
    pins += [f"{name}=={version}" for name, version in image_packages(arch, flash_attn).items() if name not in named]
    pins += list(versions.build_deps)
    if not arch.is_gpu:
        pins.insert(0, f"torch=={versions.torch_cpu}")
    return pins


def wheelhouse_plan(arch: Arch, versions: Versions, folder: Path, *, lock: Path, train: Path, dev: Path | None = None,
                    python: str = sys.executable, flash_attn: str = "auto") -> WheelhousePlan:
    """The pip commands that fill `folder` for `arch`: pure (reads only the requirement files)."""
    pip = (python, "-m", "pip", "download", "--disable-pip-version-check", "--dest", str(folder))
    required = required_pins(arch, versions, train, flash_attn)
    # Sdists (deepspeed, flash-attn) have their metadata prepared by pip: no build isolation (it would
    # fetch a CUDA torch), and flash-attn must not try to compile or fetch a prebuilt wheel for that.
    env = {"FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE", "DS_BUILD_OPS": "0"}
    if not arch.is_gpu:
        # The cpu image's Python is the host's (3.11): resolve the lock for real.
        cmd = (*pip, "--no-build-isolation", "-c", str(folder / CONSTRAINTS), f"torch=={versions.torch_cpu}", *versions.build_deps,
               "-r", str(train), f"deepspeed=={versions.deepspeed}")
        # The table's packages the lock cannot hold (bitsandbytes: --no-deps beside the CPU torch, whose
        # dependency resolution would pull a CUDA torch; requirements/no-deps.txt): their own wheels only.
        locked = set(read_pins(lock))
        extra = tuple(p for p in required if canonical(p.split("==")[0]) not in locked
                      and p not in versions.build_deps and not p.startswith("torch=="))
        commands = (cmd, (*pip, "--no-deps", *extra)) if extra else (cmd,)
        return WheelhousePlan(arch.name, str(folder), arch.python or "", commands, MappingProxyType(env),
                              tuple(required), CUDA_PREFIXES, _hashes(lock), str(lock))
    dev_names = set(read_pins(dev)) if dev and dev.is_file() else set()
    pins = [f"{name}=={version}" for name, version in read_pins(lock).items()
            if name not in ROCM_EXCLUDED and name not in dev_names and not name.startswith(CUDA_PREFIXES)]
    have = {canonical(q.split("==")[0]) for q in pins}
    pins += [p for p in required if canonical(p.split("==")[0]) not in have]
    sources = [p for p in pins if canonical(p.split("==")[0]) in NO_ISOLATION_SDISTS]
    wheels = [p for p in pins if p not in sources]
    target = ("--python-version", arch.python or "3.12", "--implementation", "cp",
              *(arg for plat in ROCM_PLATFORMS for arg in ("--platform", plat)))
    # --no-deps: the lock is already the whole closure; torch and its kin come from the base image.
    commands = ((*pip, "--no-deps", "--prefer-binary", *target, *wheels),
                (*pip, "--no-deps", "--no-build-isolation", "--no-binary", ":all:", *target, *sources))
    return WheelhousePlan(arch.name, str(folder), arch.python or "", commands, MappingProxyType(env),
                          tuple(required), (*ROCM_EXCLUDED, *CUDA_PREFIXES), _hashes(lock))


def _hashes(lock: Path) -> Mapping[str, frozenset[str]]:
    """The lock's hashes and those of no-deps.txt beside it (bitsandbytes)."""
    return MappingProxyType(read_hashes(*(p for p in (lock, lock.with_name("no-deps.txt")) if p.is_file())))


def hash_problems(plan: WheelhousePlan, *, make_hint: str) -> tuple[list[Problem], list[str]]:
    """(a problem per file of a hashed pin that is none of PyPI's files of it, the files no hash covers)."""
    problems, unchecked = [], []
    for path in sorted(Path(plan.folder).iterdir()):
        parsed = parse_filename(path.name) if path.is_file() else None
        if parsed is None:
            continue
        known = plan.hashes.get(parsed[0])
        if not known:
            unchecked.append(path.name)
        elif file_sha256(path) not in known:
            problems.append(Problem(plan.folder, path.name, f"not a file PyPI has for {parsed[0]}=={parsed[1]}: its "
                                    "sha256 is none of the lock's (requirements/lock.txt)",
                                    f"delete it and run `{make_hint}`; if the lock changed, scripts/lock_hashes.py"))
    return problems, unchecked


_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SDIST = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)\.(tar\.gz|zip|tar\.bz2)$")


def parse_filename(filename: str) -> tuple[str, str] | None:
    """(canonical name, version) of a wheel or sdist file name, None for anything else."""
    match = _WHEEL.match(filename) or _SDIST.match(filename)
    if not match:
        return None
    return canonical(match.group("name")), match.group("version")


def contents(folder: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in folder.iterdir() if folder.is_dir() else ():
        parsed = parse_filename(path.name)
        if parsed:
            found.setdefault(parsed[0], set()).add(parsed[1])
    return found


def _version_matches(want: str, have: set[str]) -> bool:
    # `torch==2.13.0` is satisfied by 2.13.0+cpu, as pip itself would.
    return any(v == want or v.split("+", 1)[0] == want for v in have)


def _forbidden(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name.startswith(f) if f.endswith("-") else name == f for f in forbidden)


def check(plan: WheelhousePlan, *, make_hint: str) -> None:
    """Raise a ProblemReport naming every missing or forbidden file (before an offline build)."""
    folder = Path(plan.folder)
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ProblemReport([Problem(plan.folder, "", "the wheelhouse is missing or empty", f"run `{make_hint}` first")])
    found = contents(folder)
    problems = []
    for pin in plan.required:
        name, version = pin.split("==", 1)
        name = canonical(name)
        if not _version_matches(version, found.get(name, set())):
            have = ", ".join(sorted(found.get(name, set()))) or "none"
            problems.append(Problem(plan.folder, name, f"no wheel or sdist for {name}=={version} (found: {have})",
                                    f"run `{make_hint}`"))
    manifest = folder / MANIFEST
    if manifest.is_file():
        recorded = json.loads(manifest.read_text()).get("files", [])
        named = {p.key for p in problems}
        gone = [f for f in recorded if not (folder / f).is_file() and (parse_filename(f) or ("",))[0] not in named]
        problems += [Problem(plan.folder, f, "downloaded by `make wheelhouse` but no longer there", f"run `{make_hint}`")
                     for f in gone]
    problems += hash_problems(plan, make_hint=make_hint)[0]
    for name in sorted(found):
        if _forbidden(name, plan.forbidden):
            problems.append(Problem(plan.folder, name, f"{name} must not be in the {plan.arch} wheelhouse "
                                    "(the image keeps the base image's torch stack and installs nothing CUDA)",
                                    f"delete {plan.folder} and run `{make_hint}`"))
    if problems:
        raise ProblemReport(problems)


_NOT_FOUND = re.compile(r"No matching distribution found for ([^\s]+)")


def run(plan: WheelhousePlan, *, make_hint: str, out=sys.stdout) -> int:
    """Download, write the manifest, check. Returns 0, or raises a ProblemReport naming what failed."""
    folder = Path(plan.folder)
    folder.mkdir(parents=True, exist_ok=True)
    if plan.lock:
        (folder / CONSTRAINTS).write_text(without_hashes(Path(plan.lock).read_text()))
    started = time.monotonic()
    for cmd in plan.commands:
        print(f"==> pip download for {plan.arch} (Python {plan.python}) into {folder}", file=out, flush=True)
        proc = subprocess.run(cmd, env={**os.environ, **plan.env}, capture_output=True, text=True)
        log = folder / ".download.log"  # hidden: never sent with the build context
        log.write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            text = proc.stdout + proc.stderr
            missing = _NOT_FOUND.findall(text)
            if missing:
                raise ProblemReport([Problem(plan.folder, name, "pip found no distribution for it",
                                             "check the pin in requirements/lock.txt and that PyPI is reachable")
                                     for name in missing])
            tail = "\n".join(line for line in text.splitlines() if not line.startswith("WARNING: Location"))[-3000:]
            print(tail, file=sys.stderr)
            raise ProblemReport([Problem(plan.folder, "", f"pip download failed (exit {proc.returncode}; full log {log})",
                                         "see the lines above")])
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and parse_filename(p.name))
    (folder / MANIFEST).write_text(json.dumps({"arch": plan.arch, "python": plan.python, "required": list(plan.required),
                                               "files": files}, indent=1) + "\n")
    check(plan, make_hint=make_hint)
    unchecked = hash_problems(plan, make_hint=make_hint)[1]
    if unchecked:
        print(f"==> not in the lock's hashes (taken as downloaded): {', '.join(unchecked)}", file=out)
    total = sum((folder / f).stat().st_size for f in files)
    print(f"==> {folder}: {len(files)} files, {total / 1e6:.0f} MB in {time.monotonic() - started:.0f} s", file=out)
    kept = kept_kernel_wheels(folder)
    if kept:
        # Compiled by an earlier `make image` here: a copy of this folder carries them to an air-gapped host.
        print(f"==> kernel wheels kept from earlier builds (reused, never recompiled): "
              f"{', '.join(str(p.relative_to(folder)) for p in kept)}", file=out)
    return 0


def kept_kernel_wheels(folder: Path) -> list[Path]:
    from .kernels import CONTEXT_KERNELS

    return sorted((folder / CONTEXT_KERNELS).glob("*/*.whl"))


def default_folder(arch: str) -> Path:
    from ..io import paths

    return paths.root() / "wheelhouse" / arch


def for_arch(arch: Arch, versions: Versions, folder: Path | None = None, *, flash_attn: str = "auto") -> WheelhousePlan:
    """The plan for `arch` from the project's requirement files (requirements/lock.txt, train.txt, dev.txt)."""
    from ..io import paths

    req = paths.root() / "requirements"
    return wheelhouse_plan(arch, versions, folder or default_folder(arch.name), lock=req / "lock.txt",
                           train=req / "train.txt", dev=req / "dev.txt", flash_attn=flash_attn)


def check_python(arch: Arch, version: tuple[int, int] = sys.version_info[:2]) -> None:
    """The cpu wheelhouse is resolved by this interpreter: it must be the image's Python."""
    have = f"{version[0]}.{version[1]}"
    if not arch.is_gpu and arch.python and have != arch.python:
        raise ProblemReport([Problem("docker/arches.yaml", f"arches.{arch.name}.python",
                                     f"the {arch.name} wheelhouse must be made with Python {arch.python} "
                                     f"(the image's), this is Python {have}",
                                     "run it from the project's venv: make wheelhouse ARCH=" + arch.name)])


def kernel_sources(folder: Path, versions: Versions) -> tuple[str, ...]:
    """The files of a wheelhouse an offline kernel stage compiles from: the flash-attn sdist and the build tools
    (BUILD_DEPS + KERNEL_TOOLS). Its context folder gets only these, never the whole wheelhouse."""
    wanted = {"flash-attn": versions.flash_attn}
    wanted.update({canonical(p.split("==")[0]): p.split("==")[1] for p in (*versions.build_deps, *versions.kernel_tools)})
    found = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        parsed = parse_filename(path.name)
        if parsed and wanted.get(parsed[0]) == parsed[1]:
            found.append(str(path))
    return tuple(found)
