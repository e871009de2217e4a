"""The optional packages LLaMA-Factory needs for some settings (`use_badam: true` needs badam), said in one
line each: the key, the package, the stack that lacks it, and how to add it there.

LLaMA-Factory checks them with transformers' `require_version`, which stops at the first and garbles its own
message ("No package metadata was found for The 'badam>=1.2.1' distribution was not found ...").
"""

from __future__ import annotations

import contextlib
import os
import re

from ..io.problems import Problem

# The optional packages LLaMA-Factory asks for, by the key that needs them (0.9.5: hparams/parser.py,
# `_check_extra_dependencies`). Only for naming the key: a package missing from this table is still reported.
PACKAGE_KEYS = {
    "kt-kernel": "use_kt", "transformers-kt": "use_kt", "accelerate-kt": "use_kt", "unsloth": "use_unsloth",
    "liger-kernel": "enable_liger_kernel", "mixture-of-depth": "mixture_of_depths", "vllm": "infer_backend",
    "sglang": "infer_backend", "galore_torch": "use_galore", "apollo_torch": "use_apollo", "badam": "use_badam",
    "adam-mini": "use_adam_mini", "swanlab": "use_swanlab", "matplotlib": "plot_loss", "deepspeed": "deepspeed",
    "jieba": "predict_with_generate", "nltk": "predict_with_generate", "rouge_chinese": "predict_with_generate",
}


@contextlib.contextmanager
def each_missing(lf_parser, missing: list[tuple[str, ImportError]]):
    """LLaMA-Factory's parser stops at the first optional package a setting needs and this stack lacks. Its
    own version check still runs on each; a failure is collected instead of raised, so the parser's checks
    after it run too and every missing package is reported."""
    original = lf_parser.check_version

    def check_version(requirement: str, mandatory: bool = False) -> None:
        try:
            original(requirement, mandatory)
        except ImportError as exc:  # importlib.metadata.PackageNotFoundError is one too
            missing.append((requirement, exc))

    lf_parser.check_version = check_version
    try:
        yield
    finally:
        lf_parser.check_version = original


def name(requirement: str) -> str:
    return re.split(r"[\s!=<>]", requirement, maxsplit=1)[0]


def problem(requirement: str, exc: ImportError, file: str) -> Problem:
    """One line: the package, that the stack judging the job lacks it, and how to add it there."""
    package = name(requirement)
    image_arch = os.environ.get("ROCMFT_IMAGE_ARCH")  # set in every rocmft image (docker/Dockerfile)
    stack = f"the {image_arch} image" if image_arch else "this venv"
    rebuild = f"make image ARCH={image_arch}" if image_arch else "make setup"
    found = re.search(r"but found \S+==(\S+?)\.?(\s|$)", str(exc))
    has = f"has {package} {found.group(1)}" if found else "does not have it"
    return Problem(file, PACKAGE_KEYS.get(package, ""), f"needs the package `{requirement}`; {stack} {has}",
                   f"add `{requirement}` to requirements/train.txt, then `{rebuild}`")


def problems(missing: list[tuple[str, ImportError]], file: str) -> list[Problem]:
    """One per package: LLaMA-Factory asks for vllm twice (a version range, then mandatory)."""
    found: dict[str, Problem] = {}
    for requirement, exc in missing:
        found.setdefault(name(requirement), problem(requirement, exc, file))
    return list(found.values())
