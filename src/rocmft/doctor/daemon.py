"""`make doctor`'s Docker and disk checks: is the daemon reachable, is there an image for the arch, is there room
for images and for the runs' checkpoints. `docker_facts()` asks the daemon; the checks read its answer as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..hardware.host import HostFacts
from ..image.docker_api import START_DAEMON
from .report import Finding, GiB, size

# Free space worth warning about. A ROCm PyTorch image is ~25-30 GB unpacked; a full fine-tune checkpoint
# of an 8B model with its optimizer states ~110 GB (bf16 weights 16 + fp32 master 32 + Adam 64).
IMAGE_DISK_GPU = 60 * GiB
IMAGE_DISK_CPU = 5 * GiB
RUNS_DISK_GPU = 200 * GiB
RUNS_DISK_CPU = 2 * GiB


@dataclass(frozen=True)
class DockerFacts:
    configured: bool  # DOCKER_HOST set or /var/run/docker.sock present
    reachable: bool
    where: str = ""
    error: str = ""
    version: str = ""
    root_dir: str = ""
    root_free: int | None = None
    images: Mapping[str, str] = field(default_factory=dict)  # arch -> "tag (short id)" of a usable image
    wrong_arch: Mapping[str, str] = field(default_factory=dict)  # arch -> why its tag is not usable


def docker_findings(docker: DockerFacts, target: str | None, no_gpu: bool) -> list[Finding]:
    out: list[Finding] = []

    def add(level: str, what: str, fix: str = "") -> None:
        out.append(Finding(level, what, fix))

    docker_level = "warn" if no_gpu else "fail"
    if docker.reachable:
        add("ok", f"Docker daemon reachable at {docker.where} (server {docker.version or '?'})")
        if target:
            if target in docker.images:
                add("ok", f"image for ARCH={target}: {docker.images[target]}")
            elif target in docker.wrong_arch:
                add(docker_level, f"image for ARCH={target}: {docker.wrong_arch[target]}", _image_fix(target))
            else:
                add(docker_level, f"no image for ARCH={target}", _image_fix(target))
        if docker.root_free is not None:
            need = IMAGE_DISK_CPU if target in (None, "cpu") else IMAGE_DISK_GPU
            level = "ok" if docker.root_free >= need else "warn"
            add(level, f"free disk for images ({docker.root_dir or 'Docker root'}): {size(docker.root_free)}",
                "" if level == "ok" else f"a {target or 'ROCm'} image needs ~{size(need)}: `docker system prune`, or move "
                "Docker's data-root to a larger disk")
    elif docker.configured:
        add(docker_level, f"Docker daemon not reachable at {docker.where}: {docker.error}",
            "add yourself to the `docker` group (then log in again)" if "ermission" in docker.error else
            START_DAEMON)
    else:
        add(docker_level, "no Docker daemon configured (DOCKER_HOST unset, no /var/run/docker.sock)",
            "install and start Docker (`sudo apt-get install docker.io`), or as root `eval \"$(scripts/ci/dockerd-up.sh)\"`; "
            "without Docker: RUNTIME=local")
    return out


def runs_disk_findings(host: HostFacts, no_gpu: bool) -> list[Finding]:
    runs_path = host.runs_dir if host.runs_dir in host.disk_free else next(iter(host.disk_free), None)
    if runs_path is None:
        return []
    free = host.disk_free[runs_path]  # checkpoints land in the runs dir
    need = RUNS_DISK_CPU if no_gpu else RUNS_DISK_GPU
    level = "ok" if free >= need else "warn"
    return [Finding(level, f"free disk for runs and checkpoints ({runs_path}): {size(free)}",
                    "" if level == "ok" else "full fine-tunes of 8B models write ~110 GB per checkpoint: free space, "
                    "keep fewer checkpoints (save_total_limit), or point ROCMFT_RUNS at a larger disk")]


def _image_fix(arch: str) -> str:
    if arch == "cpu":
        return "`make wheelhouse ARCH=cpu` then `make image ARCH=cpu OFFLINE=1` (no registry needed)"
    return f"`make image ARCH={arch}`"


def docker_facts(arch_names, env: Mapping[str, str] | None = None) -> DockerFacts:
    """Ask the daemon (when one is configured): reachable? version, data root, free space, an image per arch."""
    import os
    import shutil

    from ..launch.docker import daemon_configured

    env = os.environ if env is None else env
    where = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    configured = daemon_configured(env)
    if not configured:
        return DockerFacts(configured=False, reachable=False, where=where)
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        info = client.info()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable", with its reason
        return DockerFacts(configured=True, reachable=False, where=where, error=(str(exc).splitlines() or ["?"])[0][:200])
    root = info.get("DockerRootDir", "")
    free = None
    if root:
        try:
            free = shutil.disk_usage(root).free  # the same machine when the socket is local
        except OSError:
            free = None
    images, wrong = {}, {}
    try:
        from ..image import find_image, image_arch

        for name in arch_names:
            image = find_image(client, name)
            if image is None:
                continue
            tag = (image.tags or [image.short_id])[0]
            built = image_arch(image)
            if built == name:
                images[name] = f"{tag} ({image.short_id})"
            else:
                wrong[name] = f"{tag} is built for {built or 'no rocmft arch (no ai.rocmft.arch label)'}"
    except Exception:  # noqa: BLE001 - the image module is optional for a doctor run
        pass
    return DockerFacts(configured=True, reachable=True, where=where, version=info.get("ServerVersion", ""),
                       root_dir=root, root_free=free, images=images, wrong_arch=wrong)
