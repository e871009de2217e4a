"""`make image-info`'s lines, from an image's labels (as data: the labels the plan writes)."""

from __future__ import annotations

from types import SimpleNamespace

from rocmft.hardware import arches
from rocmft.hardware.versions import from_lock
from rocmft.image import build_plan
from rocmft.image.info import label_lines


def test_image_info_shows_each_table_package_with_its_version():
    plan = build_plan(arches.table()["gfx942"], from_lock(), "c" * 40, offline=True)
    text = "\n".join(label_lines(SimpleNamespace(attrs={"Config": {"Labels": dict(plan.labels)}})))
    for package, version in arches.table()["gfx942"].image_packages.items():
        assert f"  {package} {version}" in text, package
    assert [line.split() for line in text.splitlines() if "liger_kernel" in line] == [["liger_kernel", "0.8.2"]]
