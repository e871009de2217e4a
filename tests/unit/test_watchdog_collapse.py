"""The watchdog's collapse rule (callbacks/watchdog.py), fed the log entries of a real collapsed run:
`learning_rate=1000` on tiny-cpu logs grad_norm 0 and loss ln(817) = 6.7056 from step 3 on."""

from __future__ import annotations

import math

from rocmft import advice
from rocmft.callbacks.watchdog import DivergenceDetector, Thresholds

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


def detector(vocab=817, patience=3):
    d = DivergenceDetector(Thresholds(grad_norm_max=100.0, grad_norm_patience=patience, loss_rise_factor=5.0, min_steps=3))
    d.vocab_size = vocab
    return d


def test_zero_gradient_norm_for_patience_steps_is_a_collapse():
    d = detector()
    step, cause = feed_all(d, COLLAPSED)
    assert step == 5 and d.reason == "collapsed"
    assert "gradient norm exactly 0 for 3 logged steps" in cause


def test_loss_pinned_at_ln_vocab_after_being_lower_is_a_collapse_without_grad_norms():
    d = detector()
    step, cause = feed_all(d, COLLAPSED, norms=False)
    assert math.isclose(math.log(817), 6.7056, abs_tol=1e-4)
    assert step == 5 and d.reason == "collapsed" and "ln(817)" in cause


def test_a_zero_norm_while_the_learning_rate_is_zero_is_not_a_collapse():
    rows = [(s, 6.0 - s * 0.1, 0.0, 0.0) for s in range(1, 8)]
    assert feed_all(detector(), rows) == (None, None)


def test_a_healthy_run_near_ln_vocab_from_the_start_is_not_a_collapse():
    # A fresh model starts at ~ln(vocab): only a return to it after being lower counts.
    rows = [(s, 6.7056 - 0.0001 * s, 0.5, 1e-3) for s in range(1, 8)]
    assert feed_all(detector(), rows) == (None, None)


def test_advice_for_a_collapse_lowers_the_learning_rate_tenfold():
    lines = advice.rank({"reason": "collapsed", "learning_rate": 1000.0, "step": 5}, None, "tiny-cpu-x", None)
    assert lines[0].startswith("lower the learning rate tenfold (1000 -> 100)")
    assert 'SET="learning_rate=100"' in lines[0]
