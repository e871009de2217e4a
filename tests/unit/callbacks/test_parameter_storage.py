"""callbacks/metrics.parameter_storage: what a model's weights hold on this rank, by dtype, frozen and trainable
(the breakdown the hardware run needs to tell a ZeRO-3 memory excess apart). Real torch modules; a ZeRO-3 layout,
made by DeepSpeed's own zero.Init on one rank, is tests/train/test_zero3_layout_cpu.py (it needs DeepSpeed's CPU
communication op, which the ZeRO trainings there build once)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rocmft.callbacks.metrics import GIB, parameter_storage


def test_counts_bytes_by_dtype_and_trainability():
    model = torch.nn.Sequential(torch.nn.Linear(64, 32).to(torch.bfloat16), torch.nn.Linear(32, 8))
    model[0].requires_grad_(False)
    got = parameter_storage(model)
    assert got["bfloat16"] == {"trainable_gib": 0.0, "frozen_gib": pytest.approx((64 * 32 + 32) * 2 / GIB)}
    assert got["float32"] == {"trainable_gib": pytest.approx((32 * 8 + 8) * 4 / GIB), "frozen_gib": 0.0}


def test_no_model_is_an_empty_breakdown():
    assert parameter_storage(None) == {}
