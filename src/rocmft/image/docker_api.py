"""Talking to Docker (SDK 7.x, imported lazily): connect with a useful message, find images by arch,
check a base image is present without ever pulling it."""

from __future__ import annotations

import os
from typing import Mapping

from ..io.problems import Problem, ProblemReport
from .names import LABEL_PREFIX, tags

START_DAEMON = ("start it: `sudo systemctl start docker`; on a bare machine, as root, "
                "`eval \"$(scripts/ci/dockerd-up.sh)\"` (exports DOCKER_HOST); or train without Docker: RUNTIME=local")


def daemon_configured(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


def connect(timeout: int = 600):
    """A docker client that answered a ping, or a ProblemReport that says how to get one.
    The one way into the daemon: the image build, the container runtime, doctor and `make runs` share it."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a dependency of the project
        raise ProblemReport([Problem("", "docker", "the Docker SDK for Python is not installed", "make host")]) from None
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
        raise ProblemReport([Problem("", "DOCKER_HOST", f"cannot reach the Docker daemon: no Docker daemon reachable at "
                                     f"{where} ({reason})", fix)]) from None
    return client


def get_image(client, ref: str):
    """The local image `ref`, or None. Never pulls (images.get only inspects)."""
    from docker.errors import ImageNotFound, NotFound

    try:
        return client.images.get(ref)
    except (ImageNotFound, NotFound):
        return None


def find_image(client, arch: str):
    """The local rocmft image for `arch` (`rocmft:<version>-<arch>`, else the moving `rocmft:<arch>`), or None.
    Callers that run it should still compare `image_arch(image)` with the arch they want. An image of CI's
    rehearsal (`ai.rocmft.rehearsal` = 1: a CPU torch standing in for ROCm's) is never returned, whatever its tag."""
    for tag in tags(arch):
        image = get_image(client, tag)
        if image is not None and image_labels(image).get(LABEL_PREFIX + "rehearsal") != "1":
            return image
    return None


def image_labels(image) -> dict[str, str]:
    return dict((image.attrs.get("Config") or {}).get("Labels") or {})


def image_arch(image) -> str | None:
    """The arch an image was built for (its `ai.rocmft.arch` label), None for a non-rocmft image."""
    return image_labels(image).get(LABEL_PREFIX + "arch")


def require_base(client, base_image: str, *, offline: bool, arch: str) -> bool:
    """True when the base image is local. Offline, a missing base is a problem (no pull, ever);
    online it is only reported, and the daemon fetches it during the build's FROM."""
    if get_image(client, base_image) is not None:
        return True
    if not offline:
        return False
    key = f"arches.{arch}.base_image" if arch == "cpu" else "defaults.base_image"
    if arch == "cpu":
        fix = "build it locally (no registry needed): scripts/ci/build-cpu-base.sh"
    else:
        fix = (f"load it first: `docker pull {base_image}` on a connected machine, `docker save` it, "
               "`docker load` it here; or build without OFFLINE=1")
    raise ProblemReport([Problem("docker/arches.yaml", key,
                                 f"base image {base_image} is not present locally, and OFFLINE=1 never pulls", fix)])


def base_digest_problems(client, base_image: str, digest: str, *, arch: str) -> list[Problem]:
    """The arch table pins its base by digest (`base_image_digest`): the local base must be that image, by its ID
    or a registry digest; one that is not, or is not here to be checked, is refused before anything is built (the
    daemon would otherwise pull whatever the tag names now)."""
    if not digest:
        return []
    key = f"arches.{arch}.base_image_digest" if arch == "cpu" else "defaults.base_image_digest"
    image = get_image(client, base_image)
    if image is None:
        return [Problem("docker/arches.yaml", key, f"the base image {base_image} is pinned to {digest} but is not "
                        "present locally to be checked (rocmft never lets the build pull a pinned base)",
                        f"docker pull {base_image.rsplit(':', 1)[0]}@{digest} (a registry digest), then tag it "
                        f"{base_image}; or docker load the saved image")]
    digests = {image.id, *(d.rsplit("@", 1)[-1] for d in image.attrs.get("RepoDigests") or [])}
    if digest in digests:
        return []
    return [Problem("docker/arches.yaml", key, f"the local {base_image} is {image.id}, not the pinned {digest}: "
                    "its tag names another image now", "pull or load the pinned image, or update the pin "
                    "after checking what changed")]


def read_files(client, image_ref: str, path: str) -> dict[str, bytes]:
    """The regular files under `path` in an image (name -> bytes), read from a created, never started,
    container: nothing runs, so it works for a ROCm image on a host without GPUs. {} when absent."""
    import io
    import tarfile

    from docker.errors import NotFound

    container = client.containers.create(image_ref, command=["true"], entrypoint=[], network_disabled=True)
    try:
        try:
            stream, _ = container.get_archive(path)
        except NotFound:
            return {}
        buffer = io.BytesIO(b"".join(stream))
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=buffer) as tar:
            for member in tar.getmembers():
                if member.isreg():
                    handle = tar.extractfile(member)
                    out[member.name.rsplit("/", 1)[-1]] = handle.read() if handle else b""
        return out
    finally:
        container.remove(force=True)
