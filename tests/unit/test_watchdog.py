"""The divergence rules, fed log entries as the Trainer would log them."""

import math

from rocmft import advice, arches
from rocmft.callbacks.watchdog import DivergenceDetector, Thresholds


def detector(**kw):
    return DivergenceDetector(Thresholds.from_settings(kw))


def test_nan_loss_stops_at_once():
    d = detector()
    assert d.feed(1, {"loss": 2.0, "grad_norm": 1.0}) is None
    assert "loss became nan at step 2" in d.feed(2, {"loss": float("nan")})


def test_inf_grad_norm_stops():
    assert "gradient norm became inf" in detector().feed(1, {"grad_norm": math.inf, "loss": 1.0})


def test_grad_norm_must_stay_high_for_patience_steps():
    d = detector(grad_norm_max=10, grad_norm_patience=3)
    assert d.feed(1, {"loss": 1, "grad_norm": 50}) is None
    assert d.feed(2, {"loss": 1, "grad_norm": 5}) is None  # streak broken
    assert d.feed(3, {"loss": 1, "grad_norm": 50}) is None
    assert d.feed(4, {"loss": 1, "grad_norm": 60}) is None
    assert "for 3 logged steps" in d.feed(5, {"loss": 1, "grad_norm": 70})


def test_loss_rise_against_running_minimum_after_min_steps():
    d = detector(loss_rise_factor=3, min_steps=2)
    for step, loss in enumerate([2.0, 1.0], 1):
        assert d.feed(step, {"loss": loss}) is None
    assert d.feed(3, {"loss": 2.9}) is None
    assert "above 3x its running minimum 1" in d.feed(4, {"loss": 3.5})


def test_early_noise_is_tolerated():
    d = detector(loss_rise_factor=2, min_steps=3)
    assert d.feed(1, {"loss": 1.0}) is None
    assert d.feed(2, {"loss": 5.0}) is None  # within min_steps


def test_advice_is_ranked_for_the_arch():
    report = {"precision": "fp16", "learning_rate": 2e-4, "max_grad_norm": 0, "step": 7,
              "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "world_size": 8, "seed": 42}
    lines = advice.rank(report, arches.table()["gfx942"], "run-1", "runs/run-1/output/checkpoint-5")
    assert lines[0].startswith("switch precision fp16 -> bf16")
    assert "learning_rate=0.0001" in lines[1] and "RESUME=run-1" in lines[1]
    assert "max_grad_norm=1.0" in lines[2]
    assert "64 rows per step" in lines[3]
    old = advice.rank(report, arches.table()["gfx1030"], "run-1", None)
    assert old[0].startswith("switch precision fp16 -> fp32") and "RESUME" not in old[1]
