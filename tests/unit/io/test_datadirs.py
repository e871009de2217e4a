"""Which registry a recipe (or `make eval DATA=`) reads: the shipped data/ unless a name is registered only in the
user's my/data/, whose registry lists the shipped entries too."""

from __future__ import annotations

import json

from rocmft.io import datadirs


def _registry(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset_info.json").write_text(json.dumps({n: {"file_name": f"{n}.jsonl"} for n in names}))


def test_the_user_folder_only_for_a_name_only_it_registers(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv("ROCMFT_ROOT", str(root))
    monkeypatch.delenv("ROCMFT_DATA_DIR", raising=False)
    monkeypatch.delenv("ROCMFT_WORKSPACE", raising=False)
    _registry(root / "data", "demo_alpaca")
    assert datadirs.pick(["mine"], "data") == "data"  # no user registry yet: validation names the miss
    _registry(root / "my" / "data", "mine", "demo_alpaca")
    assert datadirs.pick(["demo_alpaca"], "data") == "data"  # shipped sets render as shipped
    assert datadirs.pick(["mine", "demo_alpaca"], "data") == "my/data"
    assert datadirs.pick(["mine"], "/elsewhere") == "/elsewhere"  # a recipe's own dataset_dir is kept
    lf = {"dataset": "mine,demo_alpaca", "dataset_dir": "data", "lora_rank": 8}
    assert datadirs.resolved(lf) == {**lf, "dataset_dir": "my/data"} and lf["dataset_dir"] == "data"
    assert datadirs.resolved({"dataset": "mine"}) == {"dataset": "mine", "dataset_dir": "my/data"}
    monkeypatch.setenv("ROCMFT_DATA_DIR", str(tmp_path / "outside"))
    _registry(tmp_path / "outside", "theirs")
    assert datadirs.pick(["theirs"], "data") == str(tmp_path / "outside")
