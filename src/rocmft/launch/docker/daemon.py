"""The Docker daemon and the image to run: reached, found and matched to the arch, or a Problem saying how."""

from __future__ import annotations

from ...hardware.arches import Arch
from ...image.docker_api import START_DAEMON, connect, daemon_configured  # noqa: F401 - re-exported
from ...io.problems import Problem, ProblemReport


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
