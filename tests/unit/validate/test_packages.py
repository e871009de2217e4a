"""An optional package LLaMA-Factory needs for a setting: one line naming it, the stack that lacks it, and the fix."""

import importlib.metadata

from rocmft.validate import packages

MISSING = importlib.metadata.PackageNotFoundError("The 'vllm>=0.4.3,<=0.11.0' distribution was not found ...")


def test_in_the_image_the_package_is_added_to_the_image(monkeypatch):
    monkeypatch.setenv("ROCMFT_IMAGE_ARCH", "gfx942")  # what every rocmft image sets (docker/Dockerfile)
    missing = importlib.metadata.PackageNotFoundError("The 'badam>=1.2.1' distribution was not found ...")
    problem = packages.problem("badam>=1.2.1", missing, "t.yaml")
    assert problem.line() == ("error: t.yaml: use_badam: needs the package `badam>=1.2.1`; the gfx942 image does not "
                              "have it (add `badam>=1.2.1` to requirements/train.txt, then `make image ARCH=gfx942`)")
    old = ImportError("vllm>=0.4.3,<=0.11.0 is required for a normal functioning of this module, but found "
                      "vllm==0.12.0.\nTo fix: run `pip install vllm>=0.4.3,<=0.11.0`.")
    assert "; the gfx942 image has vllm 0.12.0" in packages.problem("vllm>=0.4.3,<=0.11.0", old, "t.yaml").line()


def test_a_package_asked_for_twice_is_said_once():
    # LLaMA-Factory checks vllm's version range, then that it is there at all
    found = packages.problems([("vllm>=0.4.3,<=0.11.0", MISSING), ("vllm", MISSING)], "t.yaml")
    assert [p.line() for p in found] == [
        ("error: t.yaml: infer_backend: needs the package `vllm>=0.4.3,<=0.11.0`; this venv does not have it "
         "(add `vllm>=0.4.3,<=0.11.0` to requirements/train.txt, then `make setup`)")]
