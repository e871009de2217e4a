"""`rocmft image-info ARCH`: what an existing image holds (versions, kernels, commit), from its labels."""

from __future__ import annotations

import json

from ..io.problems import Problem, ProblemReport

NAME = "image-info"
HELP = "print what the image of ARCH holds (torch, ROCm, LLaMA-Factory, DeepSpeed, flash-attn, commit) from its labels"


def add_arguments(parser) -> None:
    parser.add_argument("arch", nargs="?",
                        help="an arch of docker/arches.yaml (finds rocmft:<version>-<arch>, else rocmft:<arch>)")
    parser.add_argument("--image", default=None, help="any image reference instead of an arch")
    parser.add_argument("--json", action="store_true", help="all labels as JSON")


def run(args) -> int:
    from ..image import docker_api
    from ..image.info import info_lines
    from .image import resolve_arch

    if args.image:
        ref = args.image
    else:
        ref = resolve_arch(args.arch).name
    client = docker_api.connect()
    image = docker_api.get_image(client, ref) if args.image else docker_api.find_image(client, ref)
    if image is None:
        hint = f"build it: make image ARCH={ref}" if not args.image else "check the name: docker images"
        what = f"image {ref}" if args.image else f"no rocmft image for {ref} (rocmft:<version>-{ref} or rocmft:{ref})"
        raise ProblemReport([Problem("", "IMAGE" if args.image else "ARCH", f"{what} is not present locally", hint)])
    from ..image.build import kernel_record
    from ..image.info import kernel_lines
    from ..image.kernels import RECORD_IN_IMAGE

    record = kernel_record(client, image.id, RECORD_IN_IMAGE)
    if args.json:
        data = {"id": image.id, "tags": image.tags, "labels": docker_api.image_labels(image), "kernel": record}
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print("\n".join([*info_lines(image), *kernel_lines(record)]))
    return 0
