from rocmft import paths
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
