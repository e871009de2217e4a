"""What the code says an image holds is what the build writes (issue 31): every version pinned in
hardware/versions.py reaches the build, every build arg the plan sends is read by the Dockerfile, and every image
label the code reads is one the Dockerfile writes. Read as data from the source files: no build runs here
(tests/docker/ check the built CPU image and the ROCm rehearsal)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rocmft.hardware import arches, versions
from rocmft.hardware.versions import from_lock
from rocmft.image import build_plan, info
from rocmft.image.names import LABEL_PREFIX

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src" / "rocmft"
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def plans():
    return {name: build_plan(arch, from_lock(), "c" * 40, offline=True) for name, arch in arches.table().items()}


def dockerfile_labels() -> set[str]:
    block = DOCKERFILE[DOCKERFILE.index("\nLABEL "):]
    return set(re.findall(r"([a-z][a-z0-9_.]+)=\"", block))


def test_every_pin_of_versions_py_reaches_the_build():
    """LIGER_KERNEL_VERSION was pinned and read by nothing: the image never had Liger."""
    args = [value for plan in plans().values() for value in plan.buildargs.values()]
    words = {w for value in args for w in value.split()}
    pinned = {name: value for name, value in vars(versions).items()
              if re.fullmatch(r"[A-Z_]+_VERSION", name) and isinstance(value, str)}
    assert {"FLASH_ATTN_VERSION", "BITSANDBYTES_VERSION", "LIGER_KERNEL_VERSION"} <= set(pinned)
    by_pin = {v: k for k, v in versions.IMAGE_PINS.items()}
    for name, value in pinned.items():
        package = by_pin.get(value) or name.removesuffix("_VERSION").lower().replace("_", "-")
        assert f"{package}=={value}" in words, f"hardware/versions.py {name}={value}: no build installs {package}=={value}"
    for dep in versions.BUILD_DEPS:
        assert dep in words, f"hardware/versions.py BUILD_DEPS {dep}: not in any build's args"


@pytest.mark.parametrize("name", sorted(arches.table()))
def test_every_build_arg_is_read_by_the_dockerfile(name):
    plan = plans()[name]
    for arg in plan.buildargs:
        uses = re.findall(r"\$\{?" + arg + r"\b", DOCKERFILE)
        assert uses, f"build arg {arg}: declared but never read by docker/Dockerfile"


def _container_labels() -> set[str]:
    """Labels put on containers (labels={...} of a create/run call), not on images."""
    found = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "labels" and isinstance(kw.value, ast.Dict):
                        found |= {k.value for k in kw.value.keys if isinstance(k, ast.Constant)}
    return found


def read_labels() -> set[str]:
    """Every image label the code names: `LABEL_PREFIX + "x"`, `label_key("x")`, "ai.rocmft.x", image-info's order."""
    text = "\n".join(p.read_text() for p in SRC.rglob("*.py"))
    names = {LABEL_PREFIX + m for m in re.findall(r'LABEL_PREFIX \+ "([a-z_]+)"', text)}
    names |= {LABEL_PREFIX + m.replace("-", "_") for m in re.findall(r'label_key\("([a-z-]+)"\)', text)}
    names |= set(re.findall(r'"(ai\.rocmft\.[a-z_]+)"', text))
    names |= {LABEL_PREFIX + k for k in info._ORDER}
    return names - _container_labels()


def test_every_label_the_code_reads_is_written_by_the_build():
    read = read_labels()
    assert {"ai.rocmft.liger_kernel", "ai.rocmft.arch", "ai.rocmft.deepspeed_ops", "ai.rocmft.packages"} <= read
    assert "ai.rocmft.role" not in read  # a container label (tiny_model, validate/where)
    missing = sorted(read - dockerfile_labels())
    assert missing == [], f"labels the code reads but docker/Dockerfile never writes: {missing}"
