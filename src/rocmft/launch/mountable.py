"""Which host paths a recipe may have mounted into a job: pure rules, one Problem per refused path.

A recipe is code from someone else (a blog post, a colleague, `make import` of a copied command line), and a
path in it becomes a bind mount: a cache variable in `env:` (TRITON_CACHE_DIR, ...) read-write, an input
(model_name_or_path, ...) read-only. `env.TRITON_CACHE_DIR=$HOME` would hand the job your whole home folder,
read-write. So (issues 32 and 43):
  - a cache is a folder INSIDE a per-image cache root: <project>/.cache/containers/<image>/ (the image's own
    caches, docker/spec.py) or .cache/tunableop/<image>/ (TUNE=1), or inside a root you allowed in your own shell
    with ROCMFT_CACHE_ROOTS=/scratch/me/cache:... (a recipe cannot set that: it is read from the caller's
    environment, never from the recipe's env:). Never a root itself, nor <project>/.cache or HF_HOME: the host's
    own files are there (compiled extensions a local run loads, the Hub token, the server's log, validation
    verdicts), and a container could read them or plant a link where the host writes (issue 43, N1);
  - never through a link: no folder between the root and the cache is a symbolic link (one inside an allowed root
    could point anywhere);
  - an input is never a system location (/etc, /usr, /proc, /run, the Docker socket...), never your home
    folder or one above it, never a dot-folder of your home (~/.ssh, ~/.aws, ~/.cache: HF_HOME and its token
    live there by default), never HF_HOME, inside it or above it, but for its hub and datasets caches (a job gets
    those mounted anyway; the token is not in them);
  - neither is ever a socket (a bind-mounted docker.sock is root on the host), nor holds a character a runtime's
    mount syntax reads (`,` splits Apptainer's --bind list, `:` Docker's and Apptainer's source:target:mode): a
    path `.../x,/home` became a second, read-write bind of /home (issue 43, N7).
The Docker runtime checks its mounts with this before it contacts the daemon (and again with the image it
resolved), the Slurm script with the same rules before it is written.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable, Mapping

from ..io.problems import Problem

CACHE_ROOTS_ENV = "ROCMFT_CACHE_ROOTS"
# Never mounted, nor anything under them: the system, the kernel's views, sockets' homes, Docker's state.
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc",
                "/sys", "/run", "/var/run", "/var/lib", "/var/log", "/var/spool", "/var/mail", "/snap")
# Never mounted as a whole (something inside may be fine: /tmp/x, /home/alice/models).
SYSTEM_FOLDERS = ("/", "/home", "/root", "/var", "/tmp", "/var/tmp", "/opt", "/srv", "/mnt", "/media", "/nix",
                  "/scratch", "/data")


def _inside(path: str, base: str) -> bool:
    path, base = posixpath.normpath(path), posixpath.normpath(base)
    return path == base or path.startswith(base.rstrip("/") + "/")


def _real(path: str) -> str:
    """Where the path really leads on this host (a symlink to /etc is /etc)."""
    try:
        return os.path.realpath(path)
    except OSError:
        return posixpath.normpath(path)


ANY_IMAGE = "*"  # the root of whichever image the job will run (its caches are judged before the image is resolved)
# What a runtime's mount syntax reads: Apptainer's --bind list is comma-separated, src:dst:opts; Docker's src:dst:mode.
MOUNT_SYNTAX = (",", ":")


def image_roots(project_root: str, image: str) -> list[str]:
    """The per-image cache roots: the image's own caches (ANY_IMAGE: any image's), and TunableOp's results of any
    image (TUNE=1 names its folder by the image it was asked for, which may be another tag of the one resolved;
    the results are GEMM choices that PyTorch checks against its versions, never code)."""
    from .docker.spec import CONTAINER_CACHES, image_slug
    from .tuning import FOLDER

    own = ANY_IMAGE if image == ANY_IMAGE else image_slug(image)
    return [posixpath.join(project_root, CONTAINER_CACHES, own), posixpath.join(project_root, FOLDER, ANY_IMAGE)]


def cache_roots(project_root: str, caller_env: Mapping[str, str], image: str = ANY_IMAGE) -> list[str]:
    roots = image_roots(project_root, image)
    for entry in (caller_env.get(CACHE_ROOTS_ENV) or "").split(":"):
        if entry.strip() and posixpath.isabs(entry.strip()):
            roots.append(posixpath.normpath(entry.strip()))
    return [r for r in dict.fromkeys(roots) if r and not _system(r, caller_env.get("HOME", ""))]


def _root_of(path: str, root: str) -> str | None:
    """The root `path` lies strictly inside (for `<folder>/*`: that folder's child it is in), or None."""
    if root.endswith("/" + ANY_IMAGE):
        parts = posixpath.relpath(path, root[:-2]).split("/")
        if parts[0] == ".." or len(parts) < 2:
            return None
        root = posixpath.join(root[:-2], parts[0])
    return root if _inside(path, root) and path != root else None


def _is_or_holds_root(path: str, root: str) -> bool:
    if root.endswith("/" + ANY_IMAGE):
        folder = root[:-2]
        return _inside(folder, path) or posixpath.dirname(path) == folder
    return _inside(root, path)


def _link_below(path: str, root: str) -> str | None:
    """The first folder from `root` (excluded) down to `path` that is a symbolic link, or None."""
    current = root
    for part in posixpath.relpath(path, root).split("/"):
        current = posixpath.join(current, part)
        if posixpath.islink(current):
            return current
        if not posixpath.exists(current):
            return None
    return None


def syntax_problem(key: str, path: str) -> Problem | None:
    """A path holding a separator of a runtime's mount syntax (`,` for Apptainer, `:` for Docker)."""
    found = [c for c in MOUNT_SYNTAX if c in path]
    if not found:
        return None
    return Problem("", key, f"{path} is not mounted into a job: it holds `{'`, `'.join(found)}`, which a runtime reads "
                   "as a separator (Apptainer's --bind list, Docker's source:target:mode)", "rename the folder")


def _system(path: str, home: str) -> str | None:
    """Why `path` is a system location or your home folder (None when it is neither)."""
    for candidate in dict.fromkeys((posixpath.normpath(path), _real(path))):
        if candidate in SYSTEM_FOLDERS:
            return f"{candidate} is a system folder"
        tree = next((t for t in SYSTEM_TREES if _inside(candidate, t)), None)
        if tree:
            return f"{candidate} is a system location ({tree})"
        if home and posixpath.isabs(home) and _inside(home, candidate):
            return f"{candidate} is your home folder" + ("" if candidate == posixpath.normpath(home) else " or above it")
        if home and posixpath.isabs(home) and _inside(candidate, home):
            first = posixpath.relpath(candidate, home).split("/")[0]
            if first.startswith(".") and first != ".cache":
                return f"{candidate} is in ~/{first}, where credentials and settings live"
    return None


def _socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _cache_why(path: str, roots: list[str], home: str) -> str | None:
    path = posixpath.normpath(path)
    why = _system(path, home) or ("it is a socket" if _socket(path) else None)
    if why:
        return why
    root = next((r for r in (_root_of(path, x) for x in roots) if r), None)
    if root is None:
        if any(_is_or_holds_root(path, x) for x in roots):
            return "it is a cache root or holds one: a job gets a folder inside one, never a whole root"
        return "outside the caches a job may write"
    link = _link_below(path, root)
    if link:
        return f"{link} is a symbolic link (a cache is mounted where it is, never through a link)"
    if posixpath.lexists(path) and not posixpath.isdir(path):
        return "it is not a folder"
    return None


def cache_problems(caches: Iterable[tuple[str, str]], roots: list[str], home: str) -> list[Problem]:
    """(variable, absolute path) of each cache a job would get read-write."""
    problems = []
    for key, path in caches:
        bad = syntax_problem(f"env.{key}", path)
        if bad:
            problems.append(bad)
            continue
        why = _cache_why(path, roots, home)
        if why:
            shown = " or ".join(r.replace("/" + ANY_IMAGE, "/<image>") for r in roots)
            problems.append(Problem("", f"env.{key}", f"{path} is not mounted into a job: {why}",
                                    f"use a folder inside {shown}, or allow a root of yours: "
                                    f"export {CACHE_ROOTS_ENV}=/path/to/caches"))
    return problems


def _near_hf_home(path: str, hf_home: str, home: str) -> str | None:
    """Why an input would show the Hub token: in ~/.cache (HF_HOME's default), or HF_HOME, inside it or above it.
    Inside HF_HOME's hub or datasets cache is fine (a model snapshot there is most users' setup): the job gets those
    two mounted anyway (docker/spec.py), and the token lives beside them, never in them."""
    shared = tuple(posixpath.join(hf_home, name) for name in ("hub", "datasets")) if hf_home else ()
    for candidate in dict.fromkeys((posixpath.normpath(path), _real(path))):
        if any(_inside(candidate, folder) for folder in shared):
            continue
        if home and posixpath.isabs(home) and _inside(candidate, posixpath.join(home, ".cache")):
            return f"{candidate} is in ~/.cache, where HF_HOME keeps the Hub token"
        if hf_home and (_inside(candidate, hf_home) or _inside(hf_home, candidate)):
            return f"{candidate} is HF_HOME, inside it or above it: its token would be in the job"
    return None


def input_problems(inputs: Iterable[tuple[str, str]], home: str, hf_home: str = "") -> list[Problem]:
    """(key, absolute path) of each input a job would get read-only."""
    problems = []
    for key, path in inputs:
        bad = syntax_problem(key, path)
        if bad:
            problems.append(bad)
            continue
        why = (_system(path, home) or _near_hf_home(path, hf_home, home)
               or ("it is a socket" if _socket(path) else None))
        if why:
            problems.append(Problem("", key, f"{path} is not mounted into a job: {why}",
                                    "point it at the model or data folder itself"))
    return problems


def recipe_problems(job_env: Mapping[str, str], args: Mapping[str, object], project_root: str,
                    caller_env: Mapping[str, str]) -> list[Problem]:
    """The same rules on a recipe before anything runs (before validation in the arch's image asks the
    daemon): its env: caches (inside any image's root: the image is not resolved yet) and its absolute inputs,
    for a runtime that mounts them (docker, slurm)."""
    from ..hardware.host import default_hf_home
    from .docker.spec import CACHE_ENV, INPUT_KEYS

    home = caller_env.get("HOME", "")
    hf_home, _ = default_hf_home(caller_env, home)
    caches = [(k, str(job_env[k])) for k in CACHE_ENV if posixpath.isabs(str(job_env.get(k) or ""))]
    inputs = []
    for key in INPUT_KEYS:
        named = str(args.get(key) or "")
        for value in named.split(",") if key == "adapter_name_or_path" else [named]:
            value = value.strip()
            if posixpath.isabs(value) and not _inside(value, project_root):
                inputs.append((key, value))
    return (cache_problems(caches, cache_roots(project_root, caller_env), home)
            + input_problems(inputs, home, posixpath.normpath(hf_home)))
