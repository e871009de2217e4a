"""The Docker daemon and the image to run: reached, found and matched to the arch, or a Problem saying how."""

from __future__ import annotations

import os
from typing import Mapping

from ...arches import Arch
from ...problems import Problem, ProblemReport

START_DAEMON = ("start it: `sudo systemctl start docker`; in CI as root `eval \"$(scripts/ci/dockerd-up.sh)\"` "
                "(exports DOCKER_HOST); or train without Docker: RUNTIME=local")


def daemon_configured(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


def connect(timeout: int = 600):
    """A docker client that answered a ping, or a ProblemReport that says how to get one."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a dependency of the project
        raise ProblemReport([Problem("", "docker", "the Docker SDK for Python is not installed", "make setup")]) from None
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, PermissionError...
        text = str(exc)
        reason = (text.splitlines() or [type(exc).__name__])[0][:200]
        if "Permission denied" in text or "PermissionError" in text:
            fix = "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log in again); or RUNTIME=local"
        else:
            fix = START_DAEMON
        raise ProblemReport([Problem("", "DOCKER_HOST", f"cannot reach the Docker daemon at {where} ({reason})", fix)]) from None
    return client


def image_hint(arch_name: str) -> str:
    if arch_name == "cpu":
        return "build it: `make image ARCH=cpu OFFLINE=1` (no registry needed)"
    return f"build it: `make image ARCH={arch_name}`"


def resolve_image(client, arch: Arch, ref: str | None = None):
    """(tag, image) of the local image to run; refused when missing (never pulled) or built for another arch."""
    from ...image import find_image, image_arch, tags
    from ...image.docker_api import get_image

    if ref:
        image = get_image(client, ref)
        if image is None:
            raise ProblemReport([Problem("", "image", f"image {ref} is not present locally (rocmft never pulls)",
                                         image_hint(arch.name))])
        tag = ref
    else:
        image = find_image(client, arch.name)
        if image is None:
            raise ProblemReport([Problem("", "ARCH", f"no image for arch {arch.name} (looked for {', '.join(tags(arch.name))})",
                                         image_hint(arch.name))])
        wanted = tags(arch.name)
        tag = next((t for t in wanted if t in (image.tags or [])), wanted[0])
    built_for = image_arch(image)
    if built_for != arch.name:
        what = f"is built for {built_for}" if built_for else "has no ai.rocmft.arch label (not built by `make image`)"
        raise ProblemReport([Problem("", "image", f"image {tag} {what}; this run needs {arch.name}", image_hint(arch.name))])
    return tag, image
