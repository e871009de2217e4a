"""How many of the rows a recipe holds out are exact copies of rows it trains on, counted on the split
LLaMA-Factory makes, not on a guess of it.

LLaMA-Factory reads a dataset's rows in file order, keeps the first `max_samples`, then holds out `val_size`
of them (data/data_utils.py split_dataset: `dataset.train_test_split(test_size=val_size, seed=seed)`; a
`val_size` over 1 is a row count). `datasets` makes that split (arrow_dataset.py train_test_split) as
`numpy.random.default_rng(seed).permutation(n)`: the first ceil(val_size x n) indices are held out, the rest
train. The same call here gives the same rows. A held-out row with a copy among the training rows scores
what the model memorised, not what it learned: `make eval` on such rows flatters the run.

numpy comes with the training stack; on the light host the count is only made when it needs no split (no
row repeats another, so no held-out row can have a copy).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

from .options import Split


@dataclass(frozen=True)
class HeldOut:
    split: Split
    rows: int  # the rows LLaMA-Factory splits (after max_samples)
    held: int  # held out
    copies: int | None  # held-out rows with an exact copy among the training rows; None: not counted
    why: str = ""  # why not counted, or why there is no split

    def line(self) -> str:
        s = self.split
        how = f"val_size {s.val_size:g}, seed {s.seed}" + (f", max_samples {s.max_samples}" if s.max_samples else "")
        head = f"{s.recipe} holds out {self.held:,} of {self.rows:,} rows ({how}, as LLaMA-Factory splits them)"
        if self.why:
            return f"{head}: {self.why}"
        if not self.copies:
            return f"{head}: none is a copy of a training row"
        return (f"{head}: {self.copies:,} are exact copies of a training row (their eval scores what was "
                f"memorised; DEDUP=1 drops the copies)")


def held_count(val_size: float, n: int) -> int:
    """datasets' n_test: a fraction is rounded up, a count over 1 taken as it is (LLaMA-Factory's int())."""
    return int(val_size) if val_size > 1 else math.ceil(val_size * n)


def count(groups: array, split: Split) -> HeldOut | None:
    """`groups`: each kept row's distinct-row id, in file order (scan.Pass.groups). None: nothing held out."""
    if not split.val_size or split.val_size <= 1e-6:
        return None
    n = len(groups) if split.max_samples is None else min(len(groups), split.max_samples)
    held = held_count(split.val_size, n)
    if held >= n or held < 1:
        return HeldOut(split, n, held, None, "LLaMA-Factory cannot split that (no training rows would be left)")
    if len(set(groups[:n])) == n:
        return HeldOut(split, n, held, 0)
    try:
        import numpy as np
    except ImportError:
        return HeldOut(split, n, held, None, "copies not counted: the split needs numpy (`make setup`)")
    ids = np.frombuffer(groups, dtype=np.int64)[:n]
    order = np.random.default_rng(split.seed).permutation(n)
    return HeldOut(split, n, held, int(np.isin(ids[order[:held]], ids[order[held:]]).sum()))
