"""The user's registry (my/data/dataset_info.json) carries the shipped entries, pointing at data/, refreshed by each
`make data`: a changed one copied again, one no longer shipped removed, the user's own entries left as they are."""

from __future__ import annotations

import json

from rocmft.cli import main as cli
from rocmft.data import workspace

from tests.conftest import ROOT

from .helpers import ALPACA, registry, write


def _project(tmp_path, monkeypatch, **shipped):
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "dataset_info.json").write_text(json.dumps(shipped))
    monkeypatch.setenv("ROCMFT_ROOT", str(root))
    monkeypatch.delenv("ROCMFT_DATA_DIR", raising=False)
    monkeypatch.delenv("ROCMFT_WORKSPACE", raising=False)
    return root


def test_make_data_registers_in_my_data_beside_the_shipped_entries(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path, monkeypatch, demo_a={"file_name": "demo_a.jsonl", "formatting": "alpaca"})
    src = write(tmp_path / "in.jsonl", ALPACA)
    (root / "recipes").mkdir()
    (root / "ds_configs").mkdir()
    (root / "docker").symlink_to(ROOT / "docker", target_is_directory=True)
    (root / "recipes" / "r.yaml").write_text("arch: cpu\ngpus_per_node: 1\nnodes: 1\nllamafactory:\n  val_size: 0.5\n")
    assert cli.main(["data", str(src), "mine", "--recipe", "r", "--no-progress"]) == 0
    data = registry(root / "my" / "data")
    assert list(data) == ["mine", "demo_a"]
    assert data["demo_a"] == {"file_name": "../../data/demo_a.jsonl", "formatting": "alpaca"}
    assert f"registered `mine` in {root}/my/data/dataset_info.json" in capsys.readouterr().out


def test_refresh_follows_the_shipped_registry_and_keeps_the_users_own(tmp_path, monkeypatch):
    root = _project(tmp_path, monkeypatch, demo_a={"file_name": "demo_a.jsonl"}, demo_b={"file_name": "demo_b.jsonl"})
    mine = root / "my" / "data"
    mine.mkdir(parents=True)
    (mine / "dataset_info.json").write_text(json.dumps({"demo_b": {"file_name": "my_b.jsonl"}, "own": {"file_name": "own.jsonl"}}))
    assert workspace.refresh(mine)
    assert registry(mine) == {"demo_b": {"file_name": "my_b.jsonl"}, "own": {"file_name": "own.jsonl"},
                              "demo_a": {"file_name": "../../data/demo_a.jsonl"}}  # the user's demo_b stays theirs
    assert not workspace.refresh(mine)  # up to date: not rewritten
    (root / "data" / "dataset_info.json").write_text(json.dumps({"demo_c": {"file_name": "c.jsonl", "ranking": True}}))
    assert workspace.refresh(mine)
    assert registry(mine) == {"demo_b": {"file_name": "my_b.jsonl"}, "own": {"file_name": "own.jsonl"},
                              "demo_c": {"file_name": "../../data/c.jsonl", "ranking": True}}
    assert not workspace.refresh(root / "data")  # the shipped registry itself is never touched
