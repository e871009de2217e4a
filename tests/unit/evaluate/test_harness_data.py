"""Where a harness task's data comes from, read from lm-evaluation-harness's own task index (the pinned lm_eval,
only the test's own task folder indexed): a group YAML is handed over by its group's name, Hub datasets are told
from local files, and the cache is looked up as `datasets` reads it offline."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from rocmft.evaluate import harness_data
from tests.conftest import ROOT

HUB_TASK = {"task": "hub_task", "dataset_path": "someorg/some_set", "output_type": "generate_until",
            "doc_to_text": "{{q}}", "doc_to_target": "{{a}}", "test_split": "test"}
LOCAL_TASK = {"task": "local_task", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": "x.jsonl"}},
              "output_type": "generate_until", "doc_to_text": "{{q}}", "doc_to_target": "{{a}}", "test_split": "test",
              "tag": "my_tag"}
GROUP = {"group": "my_group", "task": ["hub_task", "local_task"]}


@pytest.fixture(autouse=True, scope="module")
def lm_eval_imported():
    """Importing lm_eval turns on two download settings in os.environ (its __init__): undone at once, as the
    fetch worker does."""
    before = dict(os.environ)
    import lm_eval.tasks  # noqa: F401

    for name in set(os.environ) - set(before):
        del os.environ[name]


@pytest.fixture
def manager(tmp_path):
    from lm_eval.tasks import TaskManager

    for name, cfg in (("hub.yaml", HUB_TASK), ("local.yaml", LOCAL_TASK), ("group.yaml", GROUP)):
        (tmp_path / name).write_text(yaml.safe_dump(cfg))
    return TaskManager(include_path=[str(tmp_path)], include_defaults=False)


def test_a_group_yaml_is_named_by_its_group_and_a_task_yaml_is_not():
    assert harness_data.group_name(str(ROOT / "eval_tasks" / "rocmft_demo" / "rocmft_demo.yaml")) == "rocmft_demo"
    assert harness_data.group_name(str(ROOT / "eval_tasks" / "rocmft_demo" / "identity.yaml")) is None


def test_the_harness_itself_fails_on_a_group_path_and_takes_the_name(tmp_path, monkeypatch):
    """Why the name is passed: lm_eval 0.4.13 names a path's entry after its `task:` list (the issue's error)."""
    from lm_eval.tasks import TaskManager

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_text(json.dumps({"q": "a?", "a": "b"}) + "\n")
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(LOCAL_TASK))
    (tmp_path / "group.yaml").write_text(yaml.safe_dump({"group": "g", "task": ["local_task"]}))
    manager = TaskManager(include_path=[str(tmp_path)], include_defaults=False)
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        manager.load_task_or_group([str(tmp_path / "group.yaml")])
    name = harness_data.group_name(str(tmp_path / "group.yaml"))
    assert list(manager.load_task_or_group([name])) and name == "g"


def test_hub_datasets_under_a_group_a_tag_a_task_and_a_file(tmp_path, manager):
    assert harness_data.hub_datasets(manager, "my_group") == ["someorg/some_set"]
    assert harness_data.hub_datasets(manager, "hub_task") == ["someorg/some_set"]
    assert harness_data.hub_datasets(manager, "local_task") == [] and harness_data.hub_datasets(manager, "my_tag") == []
    assert harness_data.hub_datasets(manager, str(tmp_path / "group.yaml")) == ["someorg/some_set"]


def test_cached_in_either_cache_datasets_reads(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf")}
    assert not harness_data.cached("cais/mmlu", env)
    (tmp_path / "hf" / "datasets" / "cais___mmlu").mkdir(parents=True)
    assert harness_data.cached("cais/mmlu", env)
    env = {"HF_HOME": str(tmp_path / "hf2")}
    (tmp_path / "hf2" / "hub" / "datasets--cais--mmlu").mkdir(parents=True)
    assert harness_data.cached("cais/mmlu", env)


def test_offline_is_kept_and_an_unreachable_hub_turns_it_on():
    env = {"HF_HUB_OFFLINE": "1"}
    assert harness_data.go_offline_when_unreachable(env) and env == {"HF_HUB_OFFLINE": "1"}
    env = {"HF_ENDPOINT": "http://127.0.0.1:9"}  # the discard port: nothing listens there
    assert harness_data.go_offline_when_unreachable(env)
    assert env["HF_HUB_OFFLINE"] == env["HF_DATASETS_OFFLINE"] == "1"
