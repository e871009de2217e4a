from rocmft.io import paths
from rocmft.validate import inputs


def test_missing_local_model_and_unregistered_dataset_named_by_key(tmp_path):
    args = {"model_name_or_path": "models/not-built", "dataset": "demo_alpaca,nope_data", "dataset_dir": "data"}
    problems = inputs.check(args, "r.yaml", paths.root(), key_prefix="llamafactory.")
    text = "\n".join(p.line() for p in problems)
    assert "llamafactory.model_name_or_path: no model at `models/not-built`" in text
    assert "llamafactory.dataset: dataset `nope_data` is not registered" in text
    assert "demo_alpaca" not in text


def test_hub_ids_are_not_checked_offline():
    args = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "dataset": "demo_alpaca", "dataset_dir": "data"}
    assert inputs.check(args, "r.yaml", paths.root()) == []


def test_datasets_read_from_the_hub_are_a_note_not_a_missing_folder(tmp_path):
    # LLaMA-Factory's data/parser.py: REMOTE:<repo> downloads dataset_info.json from that dataset repo; ONLINE
    # takes every name as a Hub dataset id. Neither is a folder to look in.
    remote = {"model_name_or_path": "org/model", "dataset": "alpaca_en_demo", "dataset_dir": "REMOTE:llamafactory/demo_data"}
    (problem,) = inputs.check(remote, "r.yaml", tmp_path)
    assert problem.severity == "note" and problem.key == "dataset_dir"
    assert "Hub dataset repo `llamafactory/demo_data`" in problem.message
    online = {**remote, "dataset_dir": "ONLINE", "dataset": "tatsu-lab/alpaca"}
    assert [p.severity for p in inputs.check(online, "r.yaml", tmp_path)] == ["note"]


def test_relative_paths_are_read_from_the_root_given(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "dataset_info.json").write_text('{"mine": {"file_name": "mine.jsonl"}}')
    (tmp_path / "mine" / "mine.jsonl").write_text("")
    args = {"model_name_or_path": "org/model", "dataset": "mine", "dataset_dir": "mine"}
    assert inputs.check(args, "r.yaml", tmp_path) == []
    assert "no dataset_info.json in `mine`" in inputs.check(args, "r.yaml", paths.root())[0].message
