"""Which host paths a recipe may have mounted into a job: pure rules, one Problem per refused path.

A recipe is code from someone else (a blog post, a colleague, `make import` of a copied command line), and a
path in it becomes a bind mount: a cache variable in `env:` (TRITON_CACHE_DIR, ...) read-write, an input
(model_name_or_path, ...) read-only. `env.TRITON_CACHE_DIR=$HOME` would hand the job your whole home folder,
read-write. So (issue 32):
  - a cache is mounted only under the caches rocmft knows: <project>/.cache, HF_HOME, or a root you allowed in
    your own shell with ROCMFT_CACHE_ROOTS=/scratch/me/cache:... (a recipe cannot set that: it is read from
    the caller's environment, never from the recipe's env:);
  - an input is never a system location (/etc, /usr, /proc, /run, the Docker socket...), never your home
    folder or one above it, never a dot-folder of your home (~/.ssh, ~/.aws, ~/.config; ~/.cache is fine),
    never a socket;
  - neither is ever a socket: a bind-mounted docker.sock is root on the host.
The Docker runtime checks its mounts with this before it contacts the daemon, the Apptainer script with the
same rules before it is written.
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


def cache_roots(project_root: str, hf_home: str, caller_env: Mapping[str, str]) -> list[str]:
    roots = [posixpath.join(project_root, ".cache"), hf_home]
    for entry in (caller_env.get(CACHE_ROOTS_ENV) or "").split(":"):
        if entry.strip() and posixpath.isabs(entry.strip()):
            roots.append(posixpath.normpath(entry.strip()))
    return [r for r in dict.fromkeys(roots) if r and not _system(r, caller_env.get("HOME", ""))]


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


def cache_problems(caches: Iterable[tuple[str, str]], roots: list[str], home: str) -> list[Problem]:
    """(variable, absolute path) of each cache a job would get read-write."""
    problems = []
    for key, path in caches:
        why = _system(path, home) or ("it is a socket" if _socket(path) else None)
        if why is None and not any(_inside(_real(path), _real(r)) or _inside(path, r) for r in roots):
            why = "outside the caches a job may write"
        if why:
            problems.append(Problem("", f"env.{key}", f"{path} is not mounted into a job: {why}",
                                    f"use a folder under {' or '.join(roots)}, or allow a root of yours: "
                                    f"export {CACHE_ROOTS_ENV}=/path/to/caches"))
    return problems


def input_problems(inputs: Iterable[tuple[str, str]], home: str) -> list[Problem]:
    """(key, absolute path) of each input a job would get read-only."""
    problems = []
    for key, path in inputs:
        why = _system(path, home) or ("it is a socket" if _socket(path) else None)
        if why:
            problems.append(Problem("", key, f"{path} is not mounted into a job: {why}",
                                    "point it at the model or data folder itself"))
    return problems


def recipe_problems(job_env: Mapping[str, str], args: Mapping[str, object], project_root: str,
                    caller_env: Mapping[str, str]) -> list[Problem]:
    """The same rules on a recipe before anything runs (before validation in the arch's image asks the
    daemon): its env: caches and its absolute inputs, for a runtime that mounts them (docker, slurm)."""
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
    return (cache_problems(caches, cache_roots(project_root, hf_home, caller_env), home)
            + input_problems(inputs, home))
