"""The tiny test model, built on demand: a recipe naming models/tiny-llama trains in a fresh clone without a
`make demo` first. The builder is scripts/make_tiny_model.py (the one `make tiny-model`, `make demo` and the
tests run), started as a process of a Python that has torch (this venv's, or the arch's image on a light host):
the host CLI itself imports no torch.

May import: io, image.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .io import paths
from .io.problems import Problem

PATH = paths.TINY_MODEL
MARK = "rocmft-tiny.json"  # written last by the builder: a model dir without it is a half-built one
named = paths.is_tiny_model


def builder_argv(root: Path, python: str | None = None, out: str = PATH, extra: tuple[str, ...] = ()) -> list[str]:
    return [python or sys.executable, str(root / "scripts" / "make_tiny_model.py"), "--out", out, *extra]  # cwd: root


def variant(dtype: str, widen: bool = False) -> tuple[str, tuple[str, ...]]:
    """(path, builder options) of the tiny model rounded to `dtype` (bfloat16, float16): stored in it, or in float32
    with `widen` (the same values). `float32` is the tiny model itself. The canary trains these (rocmft.canary)."""
    if dtype == "float32":
        return PATH, ()
    short = {"bfloat16": "bf16", "float16": "fp16"}[dtype]
    return f"{PATH}-{short}{'-fp32' if widen else ''}", ("--dtype", dtype, *(("--widen",) if widen else ()))


def image_request(root: Path, image: str, uid: int, gid: int, out: str = PATH, extra: tuple[str, ...] = ()) -> dict:
    """`client.containers.create(**...)` for the same builder in the arch's image (a light host has no torch):
    the checkout read-only as every container sees it (launch/docker/spec.py), models/ writable, offline, no
    network, the invoking user (files it owns)."""
    models = str(root / "models")
    return dict(image=image, command=["python", "scripts/make_tiny_model.py", "--out", out, *extra], user=f"{uid}:{gid}",
                working_dir=str(root), volumes={str(root): {"bind": str(root), "mode": "ro"},
                                                models: {"bind": models, "mode": "rw"}},
                environment={"HOME": "/tmp", "HF_HUB_OFFLINE": "1"}, network_disabled=True,
                labels={"ai.rocmft.role": "tiny-model", "ai.rocmft.project": str(root)})


def _build_in_image(request: dict) -> int:
    """The builder's container through the one way into the daemon (image.docker_api.connect); its output
    goes where the venv builder's goes (this process's stdout); removed whatever happened."""
    from .image.docker_api import connect

    container = connect().containers.create(**request)
    try:
        container.start()
        sys.stdout.flush()
        for chunk in container.logs(stream=True, follow=True):
            sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return int(container.wait().get("StatusCode", 1))
    finally:
        container.remove(force=True)


def ensure(model: str, root: Path, *, file: str = "", key: str = "model_name_or_path", python: str | None = None,
           image: Callable[[], tuple[str | None, str]] | None = None, dtype: str = "float32",
           widen: bool = False) -> list[Problem]:
    """Build the tiny model when `model` names it and it is not built; problems when it cannot be. Here when
    this venv has torch, else in the image `image()` names ((image id, "") or (None, why not)). `dtype`, `widen`:
    the variant of `variant()` instead, whatever `model` says."""
    out, extra = variant(dtype, widen)
    if (out == PATH and not named(model, root)) or (root / out / MARK).is_file():
        return []
    if python is not None or importlib.util.find_spec("torch") is not None:
        code = subprocess.run(builder_argv(root, python, out, extra), cwd=root, stdin=subprocess.DEVNULL,
                              check=False).returncode
    else:
        ref, why = image() if image else (None, "no image was looked for")
        if ref is None:
            return [Problem(file, key, f"`{PATH}` is not built: this venv has no torch to build it, and {why}",
                            "`make tiny-model` (it sets up the CPU stack first)")]
        (root / "models").mkdir(exist_ok=True)  # else the daemon creates the mount's source, owned by root
        code = _build_in_image(image_request(root, ref, os.getuid(), os.getgid(), out, extra))
    if code != 0:  # the builder has printed its log's tail
        return [Problem(file, key, f"building `{out}` failed (exit {code})", "see the lines above")]
    return []
