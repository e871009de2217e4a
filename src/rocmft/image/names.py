"""The names rocmft gives its images: the repository, the tags, the label prefix. Read by the build plan and by
docker_api (which finds images by them), so neither has to import the other."""

from __future__ import annotations

from .. import __version__

REPOSITORY = "rocmft"
LABEL_PREFIX = "ai.rocmft."


def tags(arch: str, version: str = __version__) -> list[str]:
    """`rocmft:<version>-<arch>` (immutable per release) and the moving `rocmft:<arch>`."""
    return [f"{REPOSITORY}:{version}-{arch}", f"{REPOSITORY}:{arch}"]
