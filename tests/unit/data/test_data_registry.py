"""dataset_info.json: updated atomically, every other entry kept as it was, a name never replaced
without FORCE."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from rocmft.data import registry
from rocmft.io.problems import ProblemReport

from .helpers import ALPACA, MESSAGES, digest, run, write

OTHERS = """{
    "theirs": {
        "hf_hub_url": "org/their-set",
        "formatting": "sharegpt",
        "columns": {"messages": "conversations"},
        "tags": {"role_tag": "from", "content_tag": "value"}
    },
    "compact": {"file_name": "c.json", "ranking": true}
}
"""


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "dataset_info.json").write_text(OTHERS)
    return folder


def test_adding_keeps_every_other_entry_byte_for_byte(data, tmp_path):
    run(write(tmp_path / "in.jsonl", ALPACA), data)
    text = (data / "dataset_info.json").read_text()
    assert text.startswith(OTHERS.rstrip()[:-1].rstrip())  # the old text, untouched, up to its closing brace
    info = json.loads(text)
    assert list(info) == ["theirs", "compact", "ds"]
    assert info["theirs"] == json.loads(OTHERS)["theirs"] and info["compact"] == json.loads(OTHERS)["compact"]
    assert '\n    "ds": {\n        "file_name": "ds.jsonl",' in text  # the file's own indentation


def test_existing_name_refused_without_force_and_file_untouched(data, tmp_path):
    before = digest(data / "dataset_info.json")
    src = write(tmp_path / "in.jsonl", ALPACA)
    with pytest.raises(ProblemReport) as info:
        run(src, data, "theirs")
    assert "dataset `theirs` is already registered" in str(info.value) and "FORCE=1" in str(info.value)
    assert digest(data / "dataset_info.json") == before
    assert not (data / "theirs.jsonl").exists()


def test_force_replaces_only_that_entry(data, tmp_path):
    run(write(tmp_path / "in.jsonl", ALPACA), data, "theirs", force=True)
    info = json.loads((data / "dataset_info.json").read_text())
    assert info["theirs"]["file_name"] == "theirs.jsonl" and info["theirs"]["formatting"] == "alpaca"
    assert info["compact"] == {"file_name": "c.json", "ranking": True}
    assert list(info) == ["theirs", "compact"]


def test_unreadable_registry_is_never_rewritten(data, tmp_path):
    (data / "dataset_info.json").write_text('{"broken": ')
    with pytest.raises(ProblemReport) as info:
        run(write(tmp_path / "in.jsonl", ALPACA), data)
    assert "not valid JSON" in str(info.value)
    assert (data / "dataset_info.json").read_text() == '{"broken": '


def test_a_failed_rename_leaves_the_old_registry_and_no_temp_file(data, monkeypatch):
    real_replace = os.replace

    def failing(src, dst):
        if str(dst).endswith("dataset_info.json"):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError):
        registry.register(data, "new", {"file_name": "n.jsonl"}, force=False)
    assert (data / "dataset_info.json").read_text() == OTHERS
    assert sorted(p.name for p in data.iterdir()) == ["dataset_info.json"]


def test_a_new_registry_is_created(tmp_path):
    folder = tmp_path / "fresh"
    run(write(tmp_path / "in.jsonl", MESSAGES), folder)
    assert list(json.loads((folder / "dataset_info.json").read_text())) == ["ds"]


def _register(folder: str, i: int) -> None:
    from pathlib import Path

    registry.register(Path(folder), f"set{i}", {"file_name": f"set{i}.jsonl"}, force=False)


def test_concurrent_registrations_lose_nothing(data):
    with multiprocessing.get_context("fork").Pool(8) as pool:
        pool.starmap(_register, [(str(data), i) for i in range(40)])
    info = json.loads((data / "dataset_info.json").read_text())
    assert {f"set{i}" for i in range(40)} <= set(info) and "theirs" in info and "compact" in info


def test_unregister(data):
    registry.register(data, "x", {"file_name": "x.jsonl"}, force=False)
    assert registry.unregister(data, "x") and not registry.unregister(data, "x")
    assert json.loads((data / "dataset_info.json").read_text()) == json.loads(OTHERS)
