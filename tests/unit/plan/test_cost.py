"""Cost in money as data: PRICE= checked, GPU-hours from the planner's time and from a finished run's wall time
and launch plan, cost per million trained tokens (the seed's 1,250 tokens/s/GPU headline among them)."""

from __future__ import annotations

import json

import pytest

from rocmft import plan as planner
from rocmft.cli import bench as bench_cli
from rocmft.cli import plan as plan_cli
from rocmft.cli import runs as runs_cli
from rocmft.io.problems import ProblemReport
from rocmft.plan import cost
from rocmft.recipe import recipes


def test_price_is_checked():
    assert cost.parse_price(None) is None and cost.parse_price("") is None
    assert cost.parse_price("2.50") == 2.5 and cost.parse_price("$1.99") == 1.99
    for bad in ("free", "0", "-1", "nan", "inf"):
        with pytest.raises(ProblemReport):
            cost.parse_price(bad)


def test_seed_headline_as_cost_per_million_tokens():
    # 1,250 tokens/s/GPU (8x MI300X, ZeRO-3 with CPU offload): one GPU-hour trains 4.5M tokens.
    assert cost.per_million_tokens(2.0, 1250) == pytest.approx(2.0 / 4.5)
    assert cost.gpu_hours(3600, 8) == 8


def test_plan_cost_lines_follow_the_planned_time():
    result = planner.check(recipes.load("llama3-8b-z3"), steps=1000)
    fast, slow = result.throughput.time.seconds
    lines = plan_cli.cost_lines(result, "2")
    assert lines[1] == f"  GPU-hours: {cost.hours_text(fast * 8 / 3600)}-{cost.hours_text(slow * 8 / 3600)} (8 GPU(s) x the time above)"
    lo, hi = result.throughput.tokens_per_s_gpu
    assert cost.money(cost.per_million_tokens(2, hi)) in lines[2] and cost.money(fast * 8 / 3600 * 2) in lines[2]
    assert "set PRICE=" in plan_cli.cost_lines(result, None)[-1]  # no default price is assumed


def test_a_finished_run_is_costed_from_its_wall_time_and_plan(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"nproc_per_node": 8, "nnodes": 2}))
    (run / "status.json").write_text(json.dumps({"state": "succeeded", "started": 1000.0, "ended": 1000.0 + 1800}))
    assert runs_cli.money_cells(run, 1800.0, 2.0) == ("8", "$16.00")  # 16 GPUs x 0.5 h
    assert runs_cli.money_cells(tmp_path, 1800.0, 2.0) == ("-", "-")  # no launch plan: no GPU count
    line = bench_cli.money_line(run, 1250.0, "2")
    assert "measured 8 GPU-hours" in line and "$16.00 at $2/GPU-hour" in line and "$0.444 per million" in line


def _dollars(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.real_tokens  # the planner as `make plan` runs it: with the data's real row lengths
def test_make_plan_price_prints_both_ends_of_both_ranges(capsys):
    """`make plan PRICE=2` (the Makefile hands it on as --price): the cost range and the per-million range, each end
    recomputed here by hand from the planner's own time and tokens/s (USD = seconds x GPUs / 3600 x price; per
    million tokens = price / (tokens/s/GPU x 3600 / 1e6)). The slow end of the time is the upper cost; the slow
    speed the upper per-million."""
    import re
    import subprocess

    from rocmft.cli.main import main
    from tests.conftest import ROOT

    make = subprocess.run(["make", "-n", "-s", "plan", "RECIPE=llama3-8b-z3", "STEPS=1000", "PRICE=2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert "plan $'llama3-8b-z3'" in make.stdout and "--steps=$'1000' --price=$'2'" in make.stdout, make.stdout
    assert main(["plan", "llama3-8b-z3", "--steps=1000", "--price=2"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "(PRICE=)" in x)
    found = re.fullmatch(r"  cost at \$2/GPU-hour \(PRICE=\): \$([\d,.]+)-\$([\d,.]+); \$([\d,.]+)-\$([\d,.]+) "
                         r"per million trained tokens", line)
    assert found, line
    low, high, per_million_low, per_million_high = (_dollars(g) for g in found.groups())
    result = planner.check(recipes.load("llama3-8b-z3"), steps=1000)
    fast, slow = result.throughput.time.seconds
    slowest, fastest = result.throughput.tokens_per_s_gpu
    gpus = 8
    assert fast < slow and slowest < fastest  # real ranges: a collapsed one would show
    # printed to the cent or to 3 significant figures: within 0.5%
    assert low == pytest.approx(fast * gpus / 3600 * 2, rel=5e-3)
    assert high == pytest.approx(slow * gpus / 3600 * 2, rel=5e-3)
    assert per_million_low == pytest.approx(2 / (fastest * 3600 / 1e6), rel=5e-3)
    assert per_million_high == pytest.approx(2 / (slowest * 3600 / 1e6), rel=5e-3)
