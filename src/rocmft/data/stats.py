"""Length percentiles over a million rows in flat memory: a counter of values, not a list of them.

Values below 65,536 are counted exactly (the hot loop may do `hist.counts[v] += 1` itself for those);
larger ones go through `add` and are rounded to three significant digits, so the counter holds at most
a few tens of thousands of keys whatever the row count.
"""

from __future__ import annotations

from collections import Counter

EXACT_BELOW = 1 << 16


def _bucket(value: int) -> int:
    digits = len(str(value)) - 3
    return round(value, -digits)


class Histogram:
    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.big_max = 0  # the exact largest value among the rounded ones

    def add(self, value: int) -> None:
        if value < EXACT_BELOW:
            self.counts[value] += 1
        else:
            self.counts[_bucket(value)] += 1
            if value > self.big_max:
                self.big_max = value

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    @property
    def max(self) -> int:
        if not self.counts:
            return 0
        return max(self.big_max, max((v for v in self.counts if v < EXACT_BELOW), default=0))

    def percentiles(self, ps=(50, 90, 99)) -> dict[int, int]:
        """Nearest-rank percentiles: the smallest value with at least p% of the rows at or below it."""
        n = self.n
        if not n:
            return {p: 0 for p in ps}
        targets = sorted((max(1, -(-p * n // 100)), p) for p in ps)
        out: dict[int, int] = {}
        seen = 0
        i = 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            while i < len(targets) and seen >= targets[i][0]:
                out[targets[i][1]] = value
                i += 1
            if i == len(targets):
                break
        return {p: out[p] for p in ps}

    def line(self) -> str:
        if not self.counts:
            return "-"
        return "  ".join(f"p{p} {v:,}" for p, v in self.percentiles().items()) + f"  max {self.max:,}"

    def over(self, limit: int) -> int:
        """Values above `limit` (exact when limit < 65,536)."""
        return sum(c for v, c in self.counts.items() if v > limit)
