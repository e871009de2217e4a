"""Planner test helpers: recipes built in memory (independent of the shipped files) and no HF cache lookups."""

from __future__ import annotations

import pytest

from rocmft.recipe.recipes import Recipe


@pytest.fixture(autouse=True)
def _no_hub_cache(tmp_path, monkeypatch):
    """The planner reads the HF cache when it has the model, and the Hub when it may: keep the tests on the table
    and local dirs only (a test of the Hub path serves config.json itself, test_plan_hub_config.py)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-hf-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def make_recipe(arch: str = "gfx942", gpus: int = 1, nodes: int = 1, deepspeed: str = "none",
                precision: str = "auto", plan: dict | None = None, name: str = "t", **lf) -> Recipe:
    args = {"model_name_or_path": "meta-llama/Llama-2-7b-hf", "stage": "sft", "finetuning_type": "lora",
            "dataset": "demo_alpaca", "dataset_dir": "data", "cutoff_len": 1024, "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 1, "num_train_epochs": 1.0}
    args.update(lf)
    return Recipe(name=name, path=f"{name}.yaml", chain=(f"{name}.yaml",), arch=arch, gpus_per_node=gpus, nodes=nodes,
                  deepspeed=deepspeed, precision=precision, plan=plan or {}, llamafactory=args)


@pytest.fixture
def recipe_factory():
    return make_recipe


@pytest.fixture(autouse=True)
def _no_host_gpus(tmp_path, monkeypatch):
    """The planner recognises the product from this host's KFD topology: plan every test as on a host without
    GPUs (the arch's first product) unless the test builds a topology of its own."""
    from rocmft.hardware import host

    monkeypatch.setattr(host, "KFD_TOPOLOGY", str(tmp_path / "no-kfd-topology"))


@pytest.fixture(autouse=True)
def _rows_at_cutoff(request, monkeypatch):
    """The memory and FLOPs arithmetic is pinned with every row at cutoff_len (the bound the planner falls back
    to); tests of the real-token model (row lengths, padding, packing) mark themselves `real_tokens`."""
    if request.node.get_closest_marker("real_tokens") is None:
        from rocmft.plan import lengths

        monkeypatch.setattr(lengths, "read", lambda lf: "not read in this test")
