"""The divergence and collapse rules, fed log entries as the Trainer would log them."""

import math

from rocmft.callbacks.watchdog import DivergenceDetector, Thresholds
from rocmft.hardware import arches
from rocmft.recipe import advice


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
    again = "make train RECIPE=llama3-8b-z3 RESUME=run-1"
    lines = advice.rank(report, arches.table()["gfx942"], again, "runs/run-1/output/checkpoint-5")
    assert lines[0].startswith("switch precision fp16 -> bf16")
    assert lines[1].endswith(f'{again} SET="learning_rate=0.0001"')  # the whole command, its recipe included
    assert "max_grad_norm=1.0" in lines[2]
    assert "64 rows per step" in lines[3]
    old = advice.rank(report, arches.table()["gfx1030"], "make train RECIPE=x", None)
    assert old[0].startswith("switch precision fp16 -> fp32") and old[1].endswith('make train RECIPE=x SET="learning_rate=0.0001"')


# ---------------------------------------------------------------- collapse: a dead network is a failed run
# `learning_rate=1000` on tiny-cpu logs grad_norm 0 and loss ln(817) = 6.7056 from step 3 on.
# Step, loss, grad norm, learning rate: trainer_log of `make train RECIPE=tiny-cpu SET="learning_rate=1000"`.
COLLAPSED = [(1, 6.6711, 0.788, 1000.0), (2, 6.7406, 1.6, 983.0), (3, 6.7056, 0.0, 933.0),
             (4, 6.7056, 0.0, 854.0), (5, 6.7056, 0.0, 750.0), (6, 6.7056, 0.0, 629.0)]


def feed_all(detector, rows, *, norms=True):
    for step, loss, norm, lr in rows:
        logs = {"loss": loss, "learning_rate": lr, **({"grad_norm": norm} if norms else {})}
        cause = detector.feed(step, logs)
        if cause:
            return step, cause
    return None, None


def collapse_detector(vocab=817, patience=3):
    d = DivergenceDetector(Thresholds(grad_norm_max=100.0, grad_norm_patience=patience, loss_rise_factor=5.0, min_steps=3))
    d.vocab_size = vocab
    return d


def test_zero_gradient_norm_for_patience_steps_is_a_collapse():
    d = collapse_detector()
    step, cause = feed_all(d, COLLAPSED)
    assert step == 5 and d.reason == "collapsed"
    assert "gradient norm exactly 0 for 3 logged steps" in cause


def test_loss_pinned_at_ln_vocab_after_being_lower_is_a_collapse_without_grad_norms():
    d = collapse_detector()
    step, cause = feed_all(d, COLLAPSED, norms=False)
    assert step == 5 and d.reason == "collapsed" and "ln(817)" in cause
    # the level it is pinned at is ln(the model's vocab): the same rows from a model of another vocab are no collapse
    assert feed_all(collapse_detector(vocab=1000), COLLAPSED, norms=False) == (None, None)


def test_a_zero_norm_while_the_learning_rate_is_zero_is_not_a_collapse():
    rows = [(s, 6.0 - s * 0.1, 0.0, 0.0) for s in range(1, 8)]
    assert feed_all(collapse_detector(), rows) == (None, None)


def test_a_healthy_run_near_ln_vocab_from_the_start_is_not_a_collapse():
    # A fresh model starts at ~ln(vocab): only a return to it after being lower counts.
    rows = [(s, 6.7056 - 0.0001 * s, 0.5, 1e-3) for s in range(1, 8)]
    assert feed_all(collapse_detector(), rows) == (None, None)


def test_advice_for_a_collapse_lowers_the_learning_rate_tenfold():
    lines = advice.rank({"reason": "collapsed", "learning_rate": 1000.0, "step": 5}, None, "make train RECIPE=tiny-cpu", None)
    assert lines[0].startswith("lower the learning rate tenfold (1000 -> 100)")
    assert 'SET="learning_rate=100"' in lines[0]


def test_the_callback_reads_the_vocabulary_and_reports_the_reason(tmp_path):
    import json
    from types import SimpleNamespace

    import pytest

    from rocmft.callbacks.watchdog import Diverged, WatchdogCallback

    cb = WatchdogCallback({"grad_norm_patience": 2}, tmp_path, {"arch": "cpu"})
    multimodal = SimpleNamespace(config=SimpleNamespace(vocab_size=None, text_config=SimpleNamespace(vocab_size=817)))
    cb.on_train_begin(None, None, None, model=multimodal)
    assert cb.detector.vocab_size == 817
    args = SimpleNamespace(learning_rate=1000.0, max_grad_norm=1.0, per_device_train_batch_size=4,
                           gradient_accumulation_steps=1, world_size=1, seed=42)
    for step, loss, norm, lr in COLLAPSED[:3]:
        cb.on_log(args, SimpleNamespace(global_step=step, is_world_process_zero=True), None,
                  logs={"loss": loss, "grad_norm": norm, "learning_rate": lr})
    with pytest.raises(Diverged, match="gradient norm exactly 0 for 2 logged steps"):
        step, loss, norm, lr = COLLAPSED[3]
        cb.on_log(args, SimpleNamespace(global_step=step, is_world_process_zero=True), None,
                  logs={"loss": loss, "grad_norm": norm, "learning_rate": lr})
    report = json.loads((tmp_path / "output" / "diverged.json").read_text())
    assert report["reason"] == "collapsed" and report["vocab_size"] == 817 and report["step"] == 4
