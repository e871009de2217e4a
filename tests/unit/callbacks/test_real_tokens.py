"""The real-token rate's plumbing (callbacks/metrics.py): the callback wraps the collate function of the DataLoader
that iterates (accelerate's DataLoaderShard around torch's, as the Trainer builds it), counts what each call was
handed, keeps the steps after warm-up, and divides by the world size for "per GPU". Real torch and accelerate
loaders; the Trainer's events are called by hand with a clock the test moves (no training here: the CPU bench in
tests/train/ runs it for real)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from accelerate.data_loader import DataLoaderShard  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from rocmft.callbacks import metrics  # noqa: E402

# Rows of 3..10 real tokens, each with 2 mask zeros already in it (a pair's or packed row's own padding).
ROWS = [{"input_ids": list(range(n + 2)), "attention_mask": [1] * n + [0, 0]} for n in (3, 7, 4, 10, 5, 6, 8, 9, 3, 7)]


class Collator:
    """Pads a batch to its longest row, and keeps what each call was handed (the test's own count)."""

    def __init__(self):
        self.handed: list[int] = []

    def __call__(self, features):
        self.handed.append(sum(sum(f["attention_mask"]) for f in features))
        longest = max(len(f["input_ids"]) for f in features)
        pad = [f["attention_mask"] + [0] * (longest - len(f["attention_mask"])) for f in features]
        return {"attention_mask": torch.tensor(pad)}


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def drive(tmp_path, monkeypatch, loader, collator, *, steps=5, world=1):
    """Steps as the Trainer makes them: on_step_begin, the step's micro-batch, 1 s of compute, on_step_end."""
    clock = Clock()
    monkeypatch.setattr(metrics.time, "perf_counter", clock)
    cb = metrics.MetricsCallback(tmp_path)
    args = SimpleNamespace(world_size=world, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                           include_num_input_tokens_seen="no")
    state = SimpleNamespace(global_step=0, max_steps=steps, num_input_tokens_seen=0, is_world_process_zero=True)
    cb.on_train_begin(args, state, None, train_dataloader=loader)
    batches = iter(loader)  # made after on_train_begin, as the Trainer's epoch loop makes it
    handed_after = []
    for _ in range(steps):
        cb.on_step_begin(args, state, None)
        batch = next(batches)
        clock.t += 1.0
        state.global_step += 1
        state.num_input_tokens_seen += int(batch["attention_mask"].numel())
        cb.on_step_end(args, state, None)
        handed_after.append(sum(collator.handed))  # what the collator had been handed when this step ended
    cb.on_train_end(args, state, None)
    return json.loads((tmp_path / "output" / "metrics.json").read_text()), handed_after


def test_real_tokens_are_what_the_collator_was_handed_over_the_measured_steps(tmp_path, monkeypatch):
    collator = Collator()
    loader = DataLoaderShard(ROWS, batch_size=2, collate_fn=collator)
    data, handed_after = drive(tmp_path, monkeypatch, loader, collator, world=1)
    assert data["warmup_steps"] == 2 and data["measured_steps"] == 3
    window = handed_after[-1] - handed_after[1]  # after the 2 warm-up steps
    assert 0 < window < handed_after[-1]
    assert data["measured_real_tokens"] == window
    assert data["real_tokens_per_s"] == pytest.approx(window / 3.0)  # 3 measured steps of 1 s
    # fewer than the Trainer's count of the padded batches: the mask's zeros and the padding are not tokens
    assert data["measured_real_tokens"] < data["measured_tokens"]


def test_per_gpu_is_the_rate_over_the_world_size(tmp_path, monkeypatch):
    """Each rank counts its own micro-batches; the sum over ranks (one process here: this rank's) over the measured
    time is the job's rate, and per GPU it is that over the world size."""
    collator = Collator()
    data, handed_after = drive(tmp_path, monkeypatch, DataLoaderShard(ROWS, batch_size=2, collate_fn=collator),
                               collator, world=4)
    window = handed_after[-1] - handed_after[1]
    assert data["world_size"] == 4
    assert data["real_tokens_per_s"] == pytest.approx(window / 3.0)
    assert data["real_tokens_per_s_per_gpu"] == pytest.approx(window / 3.0 / 4)


def test_a_loader_with_worker_processes_is_not_counted(tmp_path, monkeypatch):
    """A DataLoader with workers collates in other processes: no count there, so no real-token rate at all
    rather than a wrong one."""
    collator = Collator()
    loader = DataLoader(ROWS, batch_size=2, collate_fn=collator, num_workers=1)
    cb = metrics.MetricsCallback(tmp_path)
    cb._count_real_tokens(loader)
    assert loader.collate_fn is collator and not cb._real_counted
    assert metrics.real_rate([{"period_s": 1.0}] * 3, 1, 1, None) == {}
