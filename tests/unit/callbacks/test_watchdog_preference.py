"""The watchdog's normal for DPO and KTO: the healthy runs CI trains pass untouched; a reverse-learning loss, an
exploding reward margin and a collapsing chosen log-probability stop the run; a DPO that does not start at
ln 2 is warned about."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rocmft.callbacks.watchdog import Diverged, DivergenceDetector, Objective, Thresholds, WatchdogCallback
from rocmft.recipe import advice

# (step, loss, rewards/margins, rewards/chosen, logps/chosen): the log of `make train RECIPE=tiny-cpu-dpo
# SET="max_steps=20"` (beta 0.1, LoRA, learning rate 5e-3) and of tiny-cpu-kto, as LLaMA-Factory logged them.
HEALTHY_DPO = [(1, 0.6931, 0.0, 0.0, -142.693), (2, 0.6587, 0.0716, 0.0864, -217.271), (3, 0.6395, 0.1133, 0.1455, -267.462),
               (4, 0.5471, 0.3336, 0.3887, -283.009), (5, 0.6172, 0.1823, 0.1518, -142.98), (6, 0.5068, 0.4394, 0.519, -255.559),
               (7, 0.6443, 0.1085, 0.1234, -117.945), (8, 0.62, 0.1874, 0.2905, -135.215), (9, 0.4977, 0.5145, 0.5256, -270.228),
               (10, 0.6415, 0.1235, 0.1987, -177.422), (11, 0.612, 0.1959, 0.0863, -131.805), (12, 0.5941, 0.2318, 0.4506, -242.076),
               (13, 0.595, 0.2229, 0.2952, -213.288), (14, 0.5274, 0.4325, 0.5581, -332.61), (15, 0.595, 0.2256, 0.1852, -146.08),
               (16, 0.6148, 0.1673, 0.2684, -214.701), (17, 0.6168, 0.1827, 0.142, -115.969), (18, 0.6249, 0.1475, 0.1745, -195.436),
               (19, 0.4908, 0.4854, 0.58, -300.452), (20, 0.6275, 0.1392, 0.1465, -189.903)]
HEALTHY_KTO = [(1, 0.5, None, 0.0, -125.921), (2, 0.4846, None, 0.1113, -331.308), (3, 0.503, -0.033, 0.1345, -145.535),
               (4, 0.4249, 0.7331, 0.8289, -402.146), (5, 0.4532, 0.3822, 0.382, -247.931), (6, 0.4889, -0.0423, 0.0325, -52.61),
               (7, 0.4259, 0.5984, 0.668, -340.475), (8, 0.4747, -0.0024, 0.1542, -119.239), (9, 0.4819, 0.3416, 0.6249, -350.189),
               (10, 0.4769, 0.1856, 0.4603, -227.525), (17, 0.4134, 1.2441, 1.3812, -456.992), (20, 0.4491, 0.4139, 0.3242, -178.026)]


def logs(loss, margin, chosen_reward, chosen_logp):
    out = {"loss": loss, "grad_norm": 0.5, "learning_rate": 1e-3, "rewards/chosen": chosen_reward, "logps/chosen": chosen_logp}
    if margin is not None:
        out["rewards/margins"] = margin
    return out


def run(rows, objective, **settings):
    d = DivergenceDetector(Thresholds.from_settings({"min_steps": 2, **settings}), objective)
    d.vocab_size = 817
    for step, *values in rows:
        cause = d.feed(step, logs(*values))
        if cause:
            return d, step, cause
    return d, None, None


DPO = Objective.from_args({"stage": "dpo", "pref_loss": "sigmoid", "pref_beta": 0.1})


def test_the_healthy_runs_ci_trains_are_left_alone():
    d, step, cause = run(HEALTHY_DPO, DPO)
    assert cause is None and d.warnings == []  # starts at ln 2, no warning
    assert max(r for _, r in d.chosen_ratios) < 1.05  # the policy's chosen log-probs stay at the reference's
    assert run(HEALTHY_KTO, Objective.from_args({"stage": "kto"}))[2] is None


def test_a_dpo_loss_near_zero_that_bounces_is_no_divergence():
    rows = [(1, 0.6931, 0.0, 0.0, -100.0), (2, 0.05, 3.0, 1.0, -99.0), (3, 0.004, 5.5, 1.2, -98.0),
            (4, 0.03, 3.5, 1.0, -99.0), (5, 0.06, 2.8, 0.9, -99.5)]
    assert run(rows, DPO)[2] is None
    sft = DivergenceDetector(Thresholds.from_settings({"min_steps": 2}))
    assert [sft.feed(s, {"loss": x[0]}) for s, *x in rows][-1] is not None  # SFT's running-minimum rule would fire


def test_a_policy_learning_the_reverse_preference_stops():
    rows = [(1, 0.6931, 0.0, 0.0, -100.0), (2, 0.8, -0.1, 0.0, -100.0), (3, 1.5, -1.2, -0.5, -105.0),
            (4, 2.9, -2.8, -0.9, -109.0), (5, 3.6, -3.5, -1.0, -110.0)]
    d, step, cause = run(rows, DPO)
    assert step == 5 and "above 5x its first logged 0.6931" in cause and "reverse" in cause


def test_an_exploding_reward_margin_stops_after_patience_steps():
    rows = [(1, 0.6931, 0.0, 0.0, -100.0), (2, 0.01, 20.0, 5.0, -98.0), (3, 0.0, 60.0, 5.0, -97.0),
            (4, 0.0, 45.0, 5.0, -97.0), (5, 0.0, 70.0, 5.0, -97.0), (6, 0.0, 80.0, 5.0, -97.0), (7, 0.0, 95.0, 5.0, -97.0)]
    d, step, cause = run(rows, DPO)
    assert step == 7 and "reward margin 95 above 50 for 3 logged steps" in cause
    assert [m for _, m in d.margins][-3:] == [70.0, 80.0, 95.0]


def test_a_collapsing_chosen_log_probability_stops_whatever_the_answer_lengths():
    # The reference's log-prob of the chosen answers is logps/chosen - rewards/chosen / beta: -100 in each
    # step below, while the policy's falls to 5x it. Batches of longer answers (step 3) change both alike.
    rows = [(1, 0.6931, 0.0, 0.0, -100.0), (2, 0.3, 2.0, -10.0, -200.0), (3, 0.2, 3.0, -80.0, -1200.0),
            (4, 0.1, 4.0, -40.0, -500.0), (5, 0.1, 4.0, -41.0, -510.0), (6, 0.1, 4.0, -42.0, -520.0)]
    d, step, cause = run(rows, DPO)
    assert step == 6 and "chosen log-probability collapsed: 5.20x the reference model's" in cause
    assert d.chosen_ratios[0] == (1, 1.0) and d.chosen_ratios[1] == (2, 2.0)


def test_reference_free_losses_compare_the_chosen_log_probability_with_its_first_value():
    simpo = Objective.from_args({"stage": "dpo", "pref_loss": "simpo", "pref_beta": 2.5})
    rows = [(1, 1.6, 0.0, -16.7, -6.7), (2, 1.5, 0.3, -20.0, -8.0), (3, 1.2, 2.0, -80.0, -32.0),
            (4, 1.1, 2.5, -90.0, -36.0), (5, 1.0, 3.0, -100.0, -40.0)]
    d, step, cause = run(rows, simpo)
    assert step == 5 and "its first logged value" in cause
    healthy = [(s, loss, m, c, lp) for s, loss, m, c, lp in
               [(1, 1.6048, -0.0036, -16.7307, -6.692), (10, 1.5307, 0.0906, -16.8878, -6.755), (30, 1.5162, 0.1088, -16.9901, -6.796)]]
    assert run(healthy, simpo)[2] is None  # tiny-cpu-dpo with SimPO, as logged


def test_orpo_s_loss_is_an_sft_loss_and_rises_like_one():
    orpo = Objective.from_args({"stage": "dpo", "pref_loss": "orpo"})
    assert not orpo.bounded_loss and orpo.reference_free and not orpo.starts_at_ln2
    rows = [(1, 6.76, 0.0, -0.67, -6.7), (2, 3.0, 0.1, -0.3, -3.0), (3, 1.0, 0.2, -0.1, -1.0), (4, 6.0, 0.0, -0.6, -6.0)]
    assert "running minimum 1" in run(rows, orpo)[2]


def test_a_dpo_that_does_not_start_at_ln2_is_warned_about_not_stopped():
    rows = [(1, 0.9, -0.4, -0.3, -100.0), (2, 0.8, -0.2, -0.2, -100.0)]
    d, step, cause = run(rows, DPO)
    assert cause is None and len(d.warnings) == 1 and d.warnings[0].startswith("DPO's first loss is 0.9000, not ln 2")
    for extra in ({"pref_ftx": 0.5}, {"ref_model": "models/x"}, {"pref_bco_weight": 0.2}, {"ld_alpha": 0.5}):
        assert not Objective.from_args({"stage": "dpo", **extra}).starts_at_ln2, extra
    resumed = run([(11, 0.4, 1.0, 0.5, -100.0)], DPO)[0]  # a run resumed at step 11 has moved on: no check
    assert resumed.warnings == []


def test_the_callback_logs_step_one_prints_the_warning_and_reports_the_preference_tails(tmp_path, capsys):
    cb = WatchdogCallback({"grad_norm_patience": 2}, tmp_path, {"arch": "cpu"},
                          Objective.from_args({"stage": "dpo", "pref_beta": 0.1}))
    args = SimpleNamespace(learning_rate=5e-3, max_grad_norm=1.0, per_device_train_batch_size=4, logging_first_step=False,
                           gradient_accumulation_steps=1, world_size=1, seed=42)
    cb.on_train_begin(args, SimpleNamespace(global_step=0), None, model=None)
    assert args.logging_first_step is True  # the ln 2 check needs step 1's own loss
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    cb.on_log(args, state, None, logs=logs(0.95, -0.5, -0.2, -100.0))
    assert "[rocmft] warning: DPO's first loss is 0.9500" in capsys.readouterr().out
    with pytest.raises(Diverged, match="reward margin"):
        for step in (2, 3):
            cb.on_log(args, SimpleNamespace(global_step=step, is_world_process_zero=True), None,
                      logs=logs(0.0, 99.0, 1.0, -99.0))
    report = json.loads((tmp_path / "output" / "diverged.json").read_text())
    assert report["stage"] == "dpo" and report["pref_beta"] == 0.1 and report["reward_margin_tail"][-1] == [3, 99.0]
    lines = advice.rank(report, None, "make train RECIPE=tiny-cpu-dpo", None)
    assert lines[0] == ('raise pref_beta (0.1 -> 0.2) to keep the policy nearer the reference: '
                        'make train RECIPE=tiny-cpu-dpo SET="pref_beta=0.2"')


def test_advice_for_a_chosen_collapse_adds_an_sft_term():
    report = {"stage": "dpo", "pref_beta": 0.1, "learning_rate": 1e-5, "step": 9,
              "cause": "chosen log-probability collapsed: 4.5x the reference model's ..."}
    first = advice.rank(report, None, "make train RECIPE=x RESUME=r", "runs/r/output/checkpoint-5")[0]
    assert first.startswith("add an SFT term") and first.endswith('make train RECIPE=x RESUME=r SET="pref_ftx=0.5 pref_beta=0.2"')
