"""Training images: one Dockerfile (docker/Dockerfile), one image per arch of docker/arches.yaml.

- `plan.build_plan(...)`   pure: arch + versions + commit + offline + wheelhouse -> BuildPlan
- `wheelhouse`             `make wheelhouse`: every wheel an offline build needs, and its check
- `build`, `context`       run a plan through the Docker SDK (legacy builder), never pulling
- `info`                   what an image holds, from its labels
- `selfcheck`              runs inside the image at build time (no GPU needed)

For the launcher: `tags(arch)` and `find_image(client, arch)`; compare `image_arch(image)` (the
`ai.rocmft.arch` label) with the arch you are about to run on.
"""

from __future__ import annotations

from .docker_api import find_image, image_arch, image_labels
from .plan import LABEL_PREFIX, BuildPlan, build_plan, tags

__all__ = ["LABEL_PREFIX", "BuildPlan", "build_plan", "find_image", "image_arch", "image_labels", "tags"]
