"""The resume learning-rate callback on a real torch optimizer and transformers' own cosine schedule, restored
as the Trainer restores them (state dicts saved at the checkpoint, loaded into the resumed run's new ones).
The real resumed training is tests/train/test_train_cpu.py::test_resume_continues_the_step_count_with_a_lower_learning_rate."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rocmft.callbacks.resume_lr import ResumeLearningRateCallback  # noqa: E402


def cosine(base: float, step: int, total: int) -> float:
    """The cosine schedule without warmup, written out (transformers' get_cosine_schedule_with_warmup)."""
    return base * 0.5 * (1 + math.cos(math.pi * step / total))


def optimizer_and_schedule(lr: float, total: int):
    weight = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.AdamW([weight], lr=lr)
    return optimizer, transformers.get_scheduler("cosine", optimizer, num_warmup_steps=0, num_training_steps=total)


def checkpoint_at_the_end(lr: float, steps: int):
    optimizer, schedule = optimizer_and_schedule(lr, steps)
    for _ in range(steps):
        optimizer.step()
        schedule.step()
    return optimizer.state_dict(), schedule.state_dict()


def resumed(saved, lr: float, total: int):
    optimizer, schedule = optimizer_and_schedule(lr, total)
    optimizer.load_state_dict(saved[0])
    schedule.load_state_dict(saved[1])
    return optimizer, schedule


def begin(optimizer, schedule, lr: float, step: int) -> None:
    args = transformers.TrainingArguments(output_dir="unused", learning_rate=lr, report_to=[])
    state = transformers.TrainerState(global_step=step)
    ResumeLearningRateCallback().on_train_begin(args, state, transformers.TrainerControl(), optimizer=optimizer,
                                                lr_scheduler=schedule)


def test_the_first_resumed_step_trains_at_the_new_schedules_rate_not_the_old_schedules_end(capsys):
    saved = checkpoint_at_the_end(5e-3, 12)
    optimizer, schedule = resumed(saved, 1e-3, 16)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)  # what the Trainer's restore leaves
    begin(optimizer, schedule, 1e-3, 12)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(cosine(1e-3, 12, 16), rel=1e-9)
    assert schedule.get_last_lr()[0] == pytest.approx(cosine(1e-3, 12, 16), rel=1e-9)  # what the Trainer logs
    assert "resumed with learning_rate 0.001 (checkpoint had 0.005)" in capsys.readouterr().out
    optimizer.step()
    schedule.step()
    assert schedule.get_last_lr()[0] == pytest.approx(cosine(1e-3, 13, 16), rel=1e-9)  # step 14's rate: 8.43e-5


def test_the_same_rate_extended_says_nothing_and_still_goes_on_from_the_new_schedule(capsys):
    optimizer, schedule = resumed(checkpoint_at_the_end(5e-3, 12), 5e-3, 16)
    begin(optimizer, schedule, 5e-3, 12)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(cosine(5e-3, 12, 16), rel=1e-9)
    assert "resumed with" not in capsys.readouterr().out


def test_a_resume_in_the_middle_of_an_unchanged_run_keeps_its_rate():
    optimizer, schedule = optimizer_and_schedule(5e-3, 12)
    for _ in range(6):
        optimizer.step()
        schedule.step()
    optimizer, schedule = resumed((optimizer.state_dict(), schedule.state_dict()), 5e-3, 12)
    begin(optimizer, schedule, 5e-3, 6)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(cosine(5e-3, 6, 12), rel=1e-9)
