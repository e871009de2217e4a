"""Whether the target image has liger-kernel: the image's label when the arch's image is here, else the arch table.

The ROCm images carry `ai.rocmft.liger_kernel=<version>|none` (docker/, image/); an image built before that
label existed has no Liger. Without a local image (a laptop planning for a cluster, CI) the arch table's
`liger_kernel` says what an image built from this checkout ships. Never for `cpu`: not in the CPU venv or image.
"""

from __future__ import annotations

from functools import cache

from .. import arches

LABEL = "ai.rocmft.liger_kernel"


@cache
def _image_label(arch: str) -> str | None:
    """The label of the local image for `arch`: its value, "" for an image without it, None for no image/daemon."""
    from ..image import docker_api

    if not docker_api.daemon_configured():
        return None
    try:
        client = docker_api.connect(timeout=3)
        image = docker_api.find_image(client, arch)
    except Exception:  # noqa: BLE001 - no daemon, no SDK, a slow socket: the table decides
        return None
    return None if image is None else docker_api.image_labels(image).get(LABEL, "")


def available(arch: arches.Arch) -> bool:
    if not arch.is_gpu:
        return False
    label = _image_label(arch.name)
    if label is None:
        return arch.liger_kernel
    return label not in ("", "none")


def source(arch: arches.Arch) -> str:
    """Where `available` got its answer, for the plan's note."""
    if not arch.is_gpu:
        return "not for cpu"
    label = _image_label(arch.name)
    if label is None:
        return f"docker/arches.yaml {arch.name}: liger_kernel {str(arch.liger_kernel).lower()}"
    return f"the local {arch.name} image's label {LABEL}={label or '(absent)'}"
