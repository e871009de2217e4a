"""Cost in money: GPU-hours x a price per GPU-hour the user gives (PRICE=, USD).

No default price is shipped: cloud prices for the same GPU differ several times over between providers and
change month to month, and no first-hand list price (a provider's own page) could be checked for this table.
Third-party trackers quoted MI300X on-demand at $1.50-$6 per GPU-hour in 2026 (docs/plan.md, "Cost").
"""

from __future__ import annotations

import math

from ..io.problems import Problem, ProblemReport

ASK = "set PRICE=<USD per GPU-hour> (your provider's price: none is assumed)"


def parse_price(value) -> float | None:
    if value is None or str(value).strip() == "":
        return None
    try:
        price = float(str(value).strip().lstrip("$"))
    except ValueError:
        price = -1.0
    if not math.isfinite(price) or price <= 0:
        raise ProblemReport([Problem("", "PRICE", f"must be a price in USD per GPU-hour > 0, got `{value}`",
                                     "e.g. PRICE=2.50")])
    return price


def gpu_hours(seconds: float, gpus: int) -> float:
    return seconds * gpus / 3600.0


def money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 0.995 else f"${usd:.3g}"


def per_million_tokens(price: float, tokens_per_s_per_gpu: float) -> float:
    """USD per million trained tokens at `tokens_per_s_per_gpu`: one GPU-hour trains 3600 x that many tokens."""
    return price / (tokens_per_s_per_gpu * 3600 / 1e6)


def hours_text(hours: float) -> str:
    return f"{hours:,.1f}" if hours >= 10 else f"{hours:.3g}"
