"""The README's recipe table states each recipe's planned real tokens/s/GPU: the same text `make plan-all` prints
for it (`report.table_row`, the last cell), so a planner change that moves a figure fails here until the README
says so too. The tiny CPU recipes have no peak ("n/a (no peak)" in the README; plan-all cannot plan them without
the tiny model built, so they are not run here). The absolute anchor of these figures is test_gpu_truth.py."""

from __future__ import annotations

import re

import pytest

from rocmft import plan as planner
from rocmft.plan import report
from rocmft.recipe import recipes
from tests.conftest import ROOT

ROW = re.compile(r"^\| `([\w.-]+)` \|.*\| ([^|]+) \|$", re.MULTILINE)
README_ROWS = {name: cell.strip() for name, cell in ROW.findall((ROOT / "README.md").read_text())}
pytestmark = pytest.mark.real_tokens  # the rows' real lengths, as `make plan-all` reads them (plan/conftest.py)
PLANNED = sorted(name for name, cell in README_ROWS.items() if not cell.startswith("n/a"))


def test_the_table_is_read_and_holds_the_gpu_recipes():
    assert len(PLANNED) >= 8 and "llama3-8b-z3" in PLANNED, README_ROWS


@pytest.mark.parametrize("name", PLANNED)
def test_the_readme_states_what_plan_all_prints(name):
    printed = report.table_row(planner.check(recipes.load(name), profile=True))[-1]
    stated = README_ROWS[name]
    # the figure, then (for some) a note in parentheses that plan-all does not print
    assert stated.split(" (")[0] == printed, f"README says {stated!r} for {name}; make plan-all prints {printed!r}"
