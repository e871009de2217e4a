"""The build context `make image` sends to Docker: the project files the root `.dockerignore` allows,
plus the chosen arch's wheelhouse under `wheelhouse/<arch>/` (whatever folder it came from)."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import IO

from .kernels import CONTEXT_KERNELS, PROBE
from .plan import CONTEXT_WHEELHOUSE, BuildPlan


def ignore_patterns(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def project_files(root: Path, dockerfile: str) -> list[str]:
    """Context-relative paths (files and folders) of the project part, as `docker build` would send them."""
    from docker.utils.build import exclude_paths  # lazy: the docker SDK is only needed to build

    # Wheelhouses never come from the project walk: only the chosen one is added, by `members`.
    # Nor the kernel stage's folder: `kernel_members` alone fills it.
    patterns = [*ignore_patterns(root), "wheelhouse", CONTEXT_KERNELS]
    return sorted(exclude_paths(str(root), patterns, dockerfile=dockerfile))


def wheelhouse_files(plan: BuildPlan) -> list[Path]:
    if not (plan.offline and plan.wheelhouse):
        return []
    folder = Path(plan.wheelhouse)
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def kernel_members(plan: BuildPlan) -> list[tuple[str, Path | None]]:
    """The context's `kernels/` folder: the kernel stage's only COPY. The host-kept wheel when there is one,
    else (offline) the flash-attn sdist and build tools, and for a CK compile the probe it runs first; nothing
    else of the project."""
    files = [Path(p) for p in (plan.kernel_wheels or plan.kernel_sources)]
    if not plan.kernel_wheels and plan.kernel is not None and plan.kernel.compiles:
        files.append(PROBE)
    return [(CONTEXT_KERNELS, None), *((f"{CONTEXT_KERNELS}/{p.name}", p) for p in files)]


def members(plan: BuildPlan) -> list[tuple[str, Path | None]]:
    """(name in the context, host path) pairs; host path None = an empty folder entry."""
    root = Path(plan.context)
    # The Dockerfile COPYs ${WHEELHOUSE}: a plan may name one folder for several arches (the rehearsal does, so
    # that their dependency layers are shared).
    inside = plan.buildargs.get("WHEELHOUSE") or CONTEXT_WHEELHOUSE.format(arch=plan.arch)
    out: list[tuple[str, Path | None]] = [(rel, root / rel) for rel in project_files(root, plan.dockerfile)]
    # The folder always exists (the Dockerfile COPYs it); it holds wheels only for offline builds.
    out += [("wheelhouse", None), (inside, None)]
    out += [(f"{inside}/{p.name}", p) for p in wheelhouse_files(plan)]
    return out + kernel_members(plan)


def write(plan: BuildPlan, fileobj: IO[bytes] | None = None) -> IO[bytes]:
    """Write the context as an uncompressed tar (compressing 500 MB of wheels costs more than it saves
    on a local socket) and rewind it. Owners are 0:0 and folders 0755, so layer caches do not depend
    on who checked the project out."""
    fileobj = fileobj or tempfile.TemporaryFile(prefix="rocmft-context-")
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in members(plan):
            if path is None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            info = tar.gettarinfo(str(path), arcname=name)
            if info.islnk():
                # A file sent twice (a wheelhouse wheel that is also a kernel stage input) or hard-linked from
                # another wheelhouse: tarfile makes the second entry a hard link, which the COPY of the other
                # folder would not carry. Always send the bytes.
                info.type, info.linkname, info.size = tarfile.REGTYPE, "", path.stat().st_size
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isdir():
                info.mode = 0o755
                tar.addfile(info)
            elif info.isreg():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            elif info.issym():
                tar.addfile(info)
            # sockets, devices, fifos: never part of a context
    fileobj.seek(0)
    return fileobj


def describe(plan: BuildPlan) -> str:
    files = [p for _, p in members(plan) if p is not None and p.is_file()]
    return f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.0f} MB"


def git_commit(root: Path) -> str:
    """The checkout's commit, `-dirty` when tracked files differ from it; `unknown` outside git."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        head = git("rev-parse", "HEAD")
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    dirty = git("diff", "--quiet", "HEAD", "--").returncode != 0
    return head.stdout.strip() + ("-dirty" if dirty else "")
