"""`pipeline.prepare(need_model=True)` (train, bench): the model is there, or can be fetched, before a run dir.

A recipe naming models/tiny-llama builds it on demand (the builder `make demo` runs), before the checks that
look for it; a Hub id that is neither cached nor reachable stops with one line and no run dir.
"""

from __future__ import annotations

import shutil

import pytest

from rocmft import pipeline
from rocmft import tiny_model as tiny_model_module
from rocmft.io import paths
from rocmft.io.problems import ProblemReport
from tests.conftest import PYTHON, ROOT


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_an_uncached_hub_model_offline_is_one_error_and_no_run_dir(runs, tmp_path, tiny_model):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    with pytest.raises(ProblemReport) as raised:
        pipeline.prepare("tiny-cpu", ["model_name_or_path=rocmft-test/absent"], validate=False, need_model=True,
                         env=env)
    (problem,) = raised.value.problems
    assert problem.file == "recipes/tiny-cpu.yaml" and problem.key == "llamafactory.model_name_or_path"
    assert "make fetch MODEL=rocmft-test/absent" in problem.line()
    assert not runs.exists()


def test_render_and_plan_do_not_ask_for_the_model(runs, tmp_path, tiny_model):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    prep = pipeline.prepare("llama3-8b-z3", validate=False, env=env)  # a GPU recipe rendered on a CPU box
    assert not any("Hugging Face cache" in p.message for p in prep.messages)


def test_the_tiny_model_path_is_recognised_however_it_is_written(tmp_path):
    assert tiny_model_module.named("models/tiny-llama", tmp_path)
    assert tiny_model_module.named("./models/tiny-llama/", tmp_path)
    assert tiny_model_module.named(str(tmp_path / "models" / "tiny-llama"), tmp_path)
    assert not tiny_model_module.named("models/tiny-llama-2", tmp_path) and not tiny_model_module.named("", tmp_path)


def test_a_built_tiny_model_is_not_rebuilt(tiny_model):
    mark = tiny_model / "rocmft-tiny.json"
    before = mark.stat().st_mtime_ns
    assert tiny_model_module.ensure("models/tiny-llama", ROOT) == []
    assert mark.stat().st_mtime_ns == before


def test_a_fresh_clone_builds_the_tiny_model_before_the_checks_that_look_for_it(tmp_path, monkeypatch):
    """A copy of the project without models/: prepare builds it with scripts/make_tiny_model.py, then the
    inputs check (which would say `no model at models/tiny-llama`) passes."""
    clone = tmp_path / "clone"
    for folder in ("recipes", "ds_configs", "data", "scripts"):
        shutil.copytree(ROOT / folder, clone / folder, ignore=shutil.ignore_patterns("*.rejects.jsonl"))
    (clone / "docker").mkdir()
    shutil.copy(paths.arches_file(), clone / "docker" / "arches.yaml")
    monkeypatch.setenv("ROCMFT_ROOT", str(clone))
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    assert not (clone / "models").exists()
    assert tiny_model_module.builder_argv(clone, PYTHON)[1:] == [str(clone / "scripts" / "make_tiny_model.py"), "--out", "models/tiny-llama"]
    prep = pipeline.prepare("tiny-cpu", validate=False, need_model=True, env={"HF_HUB_OFFLINE": "1"})
    assert (clone / "models" / "tiny-llama" / "rocmft-tiny.json").is_file()
    assert (clone / "models" / "tiny-llama" / "config.json").is_file()
    from rocmft.validate import inputs

    assert inputs.check(prep.rendered.args, "train.yaml", clone) == []
    assert not (tmp_path / "runs").exists()  # prepare writes no run dir; commit does


def test_on_a_light_host_the_image_builds_it_with_the_checkout_read_only_and_models_writable(tmp_path):
    request = tiny_model_module.image_request(tmp_path, "sha256:abc", 1000, 1001)
    assert request["volumes"] == {str(tmp_path): {"bind": str(tmp_path), "mode": "ro"},
                                  str(tmp_path / "models"): {"bind": str(tmp_path / "models"), "mode": "rw"}}
    assert request["user"] == "1000:1001" and request["environment"]["HF_HUB_OFFLINE"] == "1"
    assert request["network_disabled"] is True and request["working_dir"] == str(tmp_path)
    assert request["image"] == "sha256:abc"
    assert request["command"] == ["python", "scripts/make_tiny_model.py", "--out", "models/tiny-llama"]


def test_without_torch_or_an_image_it_is_one_line_naming_make_tiny_model(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    (problem,) = tiny_model_module.ensure("models/tiny-llama", tmp_path, image=lambda: (None, "no Docker daemon"))
    assert problem.line() == ("error: model_name_or_path: `models/tiny-llama` is not built: this venv has no torch "
                              "to build it, and no Docker daemon (`make tiny-model` (it sets up the CPU stack first))")
    assert not (tmp_path / "models").exists()
