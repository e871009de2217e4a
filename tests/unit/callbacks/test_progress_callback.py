"""The progress callback inside the training processes, driven with transformers' own TrainerState: one
event per logged training step from rank 0 only, rates and ETA from the Trainer's token count; the loss plot."""

import types

from transformers import TrainerControl, TrainerState

from rocmft.callbacks.progress import ProgressCallback, eval_points, plot_losses
from rocmft.run import events


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _args(world_size=2):
    return types.SimpleNamespace(world_size=world_size, include_num_input_tokens_seen="no")


def test_one_event_per_logged_training_step_with_rates_and_eta(tmp_path):
    clock, args, state, control = Clock(), _args(), TrainerState(), TrainerControl()
    state.max_steps, state.is_world_process_zero = 10, True
    cb = ProgressCallback(tmp_path, clock=clock)
    cb.on_train_begin(args, state, control)
    assert args.include_num_input_tokens_seen == "non_padding"  # the Trainer counts tokens from now on
    for step in (1, 2):
        clock.t += 2.0
        state.global_step, state.epoch, state.num_input_tokens_seen = step, step / 20, 4000 * step
        cb.on_log(args, state, control, logs={"loss": 6.5 - step / 10, "grad_norm": 0.4, "learning_rate": 1e-3})
    cb.on_log(args, state, control, logs={"eval_loss": 6.0})  # not a training step
    cb.on_log(args, state, control, logs={"train_runtime": 4.0, "train_loss": 6.4})  # the closing summary
    cb.on_train_end(args, state, control)
    found = events.read(tmp_path)
    assert [e["event"] for e in found] == ["begin", "step", "step", "end"]
    first, second = found[1], found[2]
    assert (first["step"], second["step"], second["max_steps"]) == (1, 2, 10)
    assert second["loss"] == 6.3 and second["grad_norm"] == 0.4 and second["learning_rate"] == 1e-3
    assert second["tokens_per_s_per_gpu"] == 4000 / 2.0 / 2  # 4000 tokens in 2 s over 2 ranks
    assert second["elapsed_s"] == 4.0 and second["eta_s"] == 4.0 / 2 * 8
    assert found[3]["memory_kind"] == "rss" and found[3]["peak_memory_gib"] > 0


def test_only_rank_zero_writes(tmp_path):
    state = TrainerState()
    state.max_steps, state.is_world_process_zero, state.global_step = 4, False, 1
    cb = ProgressCallback(tmp_path)
    cb.on_train_begin(_args(), state, TrainerControl())
    cb.on_log(_args(), state, TrainerControl(), logs={"loss": 1.0})
    assert not events.path(tmp_path).exists()


def test_the_plot_needs_two_finite_losses(tmp_path):
    out = tmp_path / "output"
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text(events.encode({"event": "step", "step": 1, "loss": 6.0}) +
                                     events.encode({"event": "step", "step": 2, "loss": float("nan")}))
    assert plot_losses(tmp_path, out) is None and not (out / "training_loss.png").exists()
    with open(events.path(tmp_path), "a") as fh:
        fh.write(events.encode({"event": "step", "step": 3, "loss": 5.5}))
    png = plot_losses(tmp_path, out)
    assert png == out / "training_loss.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_plot_has_the_held_out_rows_eval_loss_where_the_run_logged_it(tmp_path):
    out = tmp_path / "output"
    out.mkdir()
    (out / "trainer_log.jsonl").write_text(
        '{"current_steps": 1, "loss": 6.0}\n{"current_steps": 6, "eval_loss": 5.9}\nnot json\n'
        '{"current_steps": 12, "eval_loss": NaN}\n{"current_steps": 12, "eval_loss": 5.1}\n')
    assert eval_points(out) == [(6, 5.9), (12, 5.1)]
    assert eval_points(tmp_path / "none") == []
    events.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)  # the job folder (runs.create)
    events.path(tmp_path).write_text("".join(events.encode({"event": "step", "step": i, "loss": 6.0 - i / 10})
                                             for i in range(1, 13)))
    assert plot_losses(tmp_path, out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_worker_registers_progress_first(tmp_path, monkeypatch):
    from rocmft import worker

    monkeypatch.delenv("ROCMFT_METRICS", raising=False)
    (tmp_path / "recipe.resolved.yaml").write_text("watchdog: {}\n")
    names = [type(c).__name__ for c in worker._callbacks(tmp_path, {})]
    assert names == ["ProgressCallback", "WatchdogCallback", "StopOnSignalCallback"]  # a step the watchdog stops at is still reported


def test_a_packed_run_counts_all_tokens_a_padded_one_the_non_padding_ones(tmp_path, monkeypatch):
    """With neat_packing LLaMA-Factory's attention mask is a 4-D float mask: its sum (the Trainer's
    "non_padding" count) is no token count, and the run would show no tokens/s."""
    from rocmft import worker

    monkeypatch.delenv("ROCMFT_METRICS", raising=False)
    for train_args, mode in (({"neat_packing": True}, "all"), ({}, "non_padding")):
        progress = worker._callbacks(tmp_path, train_args)[0]
        args = _args()
        progress.on_train_begin(args, TrainerState(), TrainerControl())
        assert args.include_num_input_tokens_seen == mode
