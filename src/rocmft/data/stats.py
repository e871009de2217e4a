"""Length percentiles over a million rows in flat memory: a counter of values, not a list of them.

Values below 65,536 are counted exactly; larger ones are rounded to three significant digits, so the
counter holds at most a few tens of thousands of keys whatever the row count.
"""

from __future__ import annotations

from collections import Counter

EXACT_BELOW = 1 << 16


def _bucket(value: int) -> int:
    if value < EXACT_BELOW:
        return value
    digits = len(str(value)) - 3
    return round(value, -digits)


class Histogram:
    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.n = 0
        self.max = 0

    def add(self, value: int) -> None:
        self.counts[value if value < EXACT_BELOW else _bucket(value)] += 1
        self.n += 1
        if value > self.max:
            self.max = value

    def percentiles(self, ps=(50, 90, 99)) -> dict[int, int]:
        """Nearest-rank percentiles: the smallest value with at least p% of the rows at or below it."""
        if not self.n:
            return {p: 0 for p in ps}
        targets = sorted((max(1, -(-p * self.n // 100)), p) for p in ps)
        out: dict[int, int] = {}
        seen = 0
        it = iter(targets)
        target = next(it)
        for value in sorted(self.counts):
            seen += self.counts[value]
            while target is not None and seen >= target[0]:
                out[target[1]] = value
                target = next(it, None)
            if target is None:
                break
        return out

    def line(self) -> str:
        if not self.n:
            return "-"
        pct = self.percentiles()
        return "  ".join(f"p{p} {v:,}" for p, v in pct.items()) + f"  max {self.max:,}"

    def over(self, limit: int) -> int:
        return sum(c for v, c in self.counts.items() if v > limit)
