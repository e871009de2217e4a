"""The planner: will a recipe fit in GPU memory, how fast will it train, and what to change if it does not.

`check(recipe)` is what `make train` calls (through `rocmft train`): it never raises for a recipe it cannot
plan (unknown model, unknown GPU memory) - it says so in `summary` and lets the run go (`fits` is False only
for a verdict of "does not fit"); what it knows to be wrong in the values (`recipe_errors`) never gets that far:
`pipeline.prepare` refuses it first. `rocmft plan` / `make plan` call `check(..., strict=True)`, which raises
the ProblemReport instead. Pure YAML/JSON arithmetic: no torch, no transformers (runs on the host CLI).
See docs/plan.md for how to read the output and memory.py / throughput.py for the model and its sources.

May import: io, hardware, recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..io.problems import Problem, ProblemReport
from ..recipe.recipes import Recipe
from . import dataset, lengths, memory, report, suggest, throughput, workload
from .memory import MemoryPlan
from .suggest import Suggestion
from .throughput import ThroughputPlan
from .workload import Workload

__all__ = ["MemoryPlan", "PlanResult", "Suggestion", "ThroughputPlan", "Workload", "check", "plan_workload",
           "recipe_errors"]


@dataclass
class PlanResult:
    recipe: Recipe
    workload: Workload | None
    memory: MemoryPlan | None
    throughput: ThroughputPlan | None
    suggestions: list[Suggestion] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # warnings; or the errors that stopped planning
    lengths_note: str = ""  # where the rows' token counts came from, or why they are unknown

    @property
    def verdict(self) -> str:
        """fits | tight | does not fit | unknown"""
        return self.memory.verdict if self.memory is not None else "unknown"

    @property
    def fits(self) -> bool:
        """False only when the plan says it does not fit: tight and unknown runs are allowed to start."""
        return self.verdict != "does not fit"

    @property
    def summary(self) -> str:
        return report.summary(self)

    def report(self) -> str:
        return report.full(self)


def recipe_errors(recipe: Recipe) -> list[Problem]:
    """The errors the planner finds in a recipe's values (`lora_rank: 0`, a batch below 1): `make train` refuses
    them before anything starts (the job would die on them, after the image started and the model loaded).
    A model or method the planner cannot model is no error: that run goes ahead unplanned."""
    return workload.value_errors(recipe)


def plan_workload(w: Workload, data: dataset.DatasetSize | None = None, steps: int | None = None
                  ) -> tuple[MemoryPlan, ThroughputPlan, list[Suggestion]]:
    mem = memory.estimate(w)
    return mem, throughput.estimate(w, data, steps), suggest.suggest(w, mem)


def check(recipe: Recipe, *, steps: int | None = None, strict: bool = False, profile: bool = False) -> PlanResult:
    """Plan a loaded recipe. `steps`: estimate the time of that many optimizer steps instead of the dataset.
    `profile`: the rows of the reference length profile for the recipe's stage (lengths.profile) instead of its data."""
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0):
        raise ProblemReport([Problem("", "STEPS", f"must be a whole number of optimizer steps > 0, got {steps!r}")])
    try:
        w, problems = workload.from_recipe(recipe)
    except ProblemReport as exc:
        if strict:
            raise
        return PlanResult(recipe, None, None, None, [], list(exc.problems))
    if profile:
        found = lengths.profile(recipe.llamafactory)
        data = dataset.DatasetSize(found.names, len(found.tokens) // w.sequences_per_sample)
        w = replace(w, lengths=found)
        note = (f"row lengths: {data.rows:,} rows of the {found.names[0]} (make plan-all, README), "
                f"mean {found.mean:.0f} tokens, by {found.how}")
    else:
        data = dataset.count(recipe.llamafactory)
        w, note = with_lengths(w, recipe.llamafactory, data)
    mem, tp, sugg = plan_workload(w, data if steps is None and w.max_steps <= 0 else None, steps)
    result = PlanResult(recipe, w, mem, tp, sugg, problems)
    result.lengths_note = note
    return result


def with_lengths(w: Workload, lf, data: dataset.DatasetSize) -> tuple[Workload, str]:
    """The workload with its rows' token counts, and a line saying where they came from (or why there are none)."""
    if w.avg_tokens:
        rows = (data.rows or 1000) * w.sequences_per_sample  # a DPO pair is two sequences
        found = lengths.Lengths(data.names, (w.avg_tokens,) * rows, f"plan.avg_tokens={w.avg_tokens} for every row")
    else:
        found = lengths.read(lf)
    if isinstance(found, str):
        return w, (f"row lengths unknown ({found}): every row counted at cutoff_len {w.cutoff_len}, an upper "
                   "bound on real tokens/s (set plan.avg_tokens for a closer figure)")
    n = len(found.tokens)
    rows = f"{n:,} sequences ({n // 2:,} pairs)" if w.sequences_per_sample > 1 else f"{n:,} rows"
    return replace(w, lengths=found), (f"row lengths: {rows} of {','.join(found.names)}, "
                                       f"mean {found.mean:.0f} tokens, by {found.how}")
