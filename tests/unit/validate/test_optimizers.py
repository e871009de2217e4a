"""GaLore and APOLLO's optimizer and per-layer rules (validate/optimizers.py), each what LLaMA-Factory 0.9.5's
trainer_utils.py raises only when it builds the optimizer, checked against its installed source."""

from __future__ import annotations

import inspect

import pytest

from rocmft.validate import optimizers


def test_the_optims_each_accepts_are_llamafactorys():
    trainer_utils = pytest.importorskip("llamafactory.train.trainer_utils")
    galore = inspect.getsource(trainer_utils._create_galore_optimizer)
    apollo = inspect.getsource(trainer_utils._create_apollo_optimizer)
    for optim in optimizers.TAKES["use_galore"][3]:
        assert f'"{optim}"' in galore
    assert optimizers.TAKES["use_apollo"][3] == ("adamw_torch",) and 'optim == "adamw_torch"' in apollo
    assert "Unknown optim" in galore and "Unknown optim" in apollo


@pytest.mark.parametrize("args,keys", [
    ({"use_galore": True}, ["optim"]),  # transformers' default, adamw_torch_fused
    ({"use_galore": True, "optim": "adafactor"}, []),
    ({"use_apollo": True, "optim": "adafactor"}, ["optim"]),
    ({"use_apollo": True, "optim": "adamw_torch", "apollo_layerwise": True, "gradient_accumulation_steps": 4},
     ["gradient_accumulation_steps"]),
    ({"use_galore": False, "optim": "sgd"}, []),
])
def test_each_refusal_is_one_line_on_its_key(args, keys):
    assert [p.key for p in optimizers.check(args, "t.yaml")] == keys
