"""Training images: one Dockerfile (docker/Dockerfile), one image per arch of docker/arches.yaml.

- `plan.build_plan(...)`   pure: arch + versions + commit + offline + wheelhouse -> BuildPlan
- `wheelhouse`             `make wheelhouse`: every wheel an offline build needs, and its check
- `build`, `context`       run a plan through the Docker SDK (legacy builder), never pulling
- `info`                   what an image holds, from its labels
- `selfcheck`              runs inside the image at build time (no GPU needed)

For the launcher: `tags(arch)` and `find_image(client, arch)`; compare `image_arch(image)` (the
`ai.rocmft.arch` label) with the arch you are about to run on.

May import: io, hardware, plan.
"""

from __future__ import annotations

import importlib

# Resolved on first use, not at import: importing the package (a launcher reading its names) must not pull in the
# Docker SDK or the build plan.
_EXPORTS = {"find_image": "docker_api", "image_arch": "docker_api", "image_labels": "docker_api",
            "LABEL_PREFIX": "names", "BuildPlan": "plan", "build_plan": "plan", "tags": "names"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
