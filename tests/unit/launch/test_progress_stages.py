"""A preference or KTO run's own signals, from the Trainer's log entry to the event file, the live line, the
plain step lines and the closing summary."""

from __future__ import annotations

import io
import types

from transformers import TrainerControl, TrainerState

from rocmft.callbacks.progress import ProgressCallback
from rocmft.launch import summary
from rocmft.launch.terminal import Display
from rocmft.recipe import stages
from rocmft.run import events

# One log entry of LLaMA-Factory's DPO trainer (train/dpo/trainer.py: its stored metrics, averaged).
DPO_LOG = {"loss": 0.5068, "grad_norm": 0.55, "learning_rate": 2.5e-3, "rewards/chosen": 0.519, "rewards/rejected": 0.0796,
           "rewards/accuracies": 0.75, "rewards/margins": 0.4394, "logps/chosen": -255.559, "logps/rejected": -40.2,
           "logits/chosen": -0.01, "logits/rejected": -0.02}
KTO_LOG = {"loss": 0.4249, "grad_norm": 0.4, "learning_rate": 1e-3, "rewards/chosen": 0.8289, "rewards/rejected": 0.0958,
           "rewards/margins": 0.7331, "logps/chosen": -402.1, "logps/rejected": -60.0, "kl": 3.37}


def test_the_callback_writes_the_stage_and_its_signals(tmp_path):
    args = types.SimpleNamespace(world_size=1, include_num_input_tokens_seen="no")
    state, control = TrainerState(), TrainerControl()
    state.max_steps, state.is_world_process_zero = 20, True
    cb = ProgressCallback(tmp_path, stage="dpo")
    cb.on_train_begin(args, state, control)
    state.global_step = 6
    cb.on_log(args, state, control, logs=dict(DPO_LOG))
    begin, step = events.read(tmp_path)
    assert begin["stage"] == "dpo"
    assert step["reward_accuracy"] == 0.75 and step["reward_margin"] == 0.4394 and step["logp_chosen"] == -255.559
    assert step["reward_chosen"] == 0.519 and "kl" not in step and "logits/chosen" not in step
    assert stages.signals(KTO_LOG)["kl"] == 3.37 and "reward_accuracy" not in stages.signals(KTO_LOG)
    assert stages.signals({"loss": 1.0}) == {}  # an SFT step carries none


def _step(n, **kw):
    return {"event": "step", "step": n, "max_steps": 20, "loss": 0.6, "tokens_per_s_per_gpu": 900.0, "eta_s": 30.0, **kw}


def test_the_live_line_and_the_plain_lines_show_accuracy_and_margin_for_dpo_and_kl_for_kto():
    display = Display(io.StringIO(), live=False)
    display.event({"event": "begin", "stage": "dpo", "max_steps": 20})
    display.event(_step(6, reward_accuracy=0.75, reward_margin=0.4394, kl=9.0))
    plain = display.out.getvalue()
    assert "[rocmft] step 6/20  loss 0.6000  acc 0.75  margin +0.439  900 tok/s/GPU" in plain and "kl" not in plain
    line = display.live_text(display.last_at)
    assert "loss 0.6000  acc 0.75  margin +0.439  900 tok/s/GPU  ETA 0:00:30" in line and len(line) <= 100
    kto = Display(io.StringIO(), live=False)
    kto.event({"event": "begin", "stage": "kto"})
    kto.event(_step(4, kl=3.37, reward_margin=0.7331))
    assert "loss 0.6000  kl 3.37  margin +0.733" in kto.out.getvalue()
    sft = Display(io.StringIO(), live=False)
    sft.event({"event": "begin"})
    sft.event(_step(4, reward_accuracy=0.5))
    assert "acc" not in sft.out.getvalue()


def test_the_summary_shows_the_reward_accuracy_and_margin_first_to_last(tmp_path):
    evs = [{"event": "begin", "world_size": 1, "max_steps": 20, "stage": "dpo"},
           _step(1, loss=0.6931, reward_accuracy=0.0, reward_margin=0.0),
           _step(18, loss=0.62, reward_accuracy=0.75, reward_margin=0.15),
           _step(19, loss=0.49, reward_accuracy=1.0, reward_margin=0.49),
           _step(20, loss=0.63, reward_accuracy=0.5, reward_margin=0.14),
           {"event": "end", "step": 20, "max_steps": 20, "elapsed_s": 6.0}]
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text("".join(events.encode(e) for e in evs))
    t = events.totals(events.read(tmp_path))
    assert t.stage == "dpo" and t.signals["reward_accuracy"] == (0.0, 0.75)  # mean of the last 3 logged steps
    text = "\n".join(summary.done_lines(tmp_path, {}))
    assert "[rocmft] steps      20/20 (training 0:00:06), stage dpo" in text
    assert "[rocmft] rewards    accuracy 0.00 -> 0.75, margin +0.000 -> +0.260 (step 1 -> mean of the last 3 logged steps)" in text
    assert summary.facts(tmp_path)["reward_accuracy"] == 0.75


def test_a_kto_summary_shows_its_kl_and_margin(tmp_path):
    evs = [{"event": "begin", "stage": "kto"}, _step(1, loss=0.5, kl=0.0), _step(2, loss=0.45, kl=2.0, reward_margin=0.6)]
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text("".join(events.encode(e) for e in evs))
    text = "\n".join(summary.done_lines(tmp_path, {}))
    assert "[rocmft] kto        kl 0.000 -> 1.000, reward margin +0.600 -> +0.600" in text
    assert "reward_accuracy" not in summary.facts(tmp_path)


def test_non_finite_signals_read_back_as_floats():
    line = events.encode(_step(3, reward_margin=float("inf"), logp_chosen=float("nan")))
    back = events.decode(line)
    assert back["reward_margin"] == float("inf") and back["logp_chosen"] != back["logp_chosen"]
