"""Pure: the harness job's two sides -> eval.json's "harness" section and eval.md's benchmark table.

Per task, metric and filter: base, tuned, the difference and each side's standard error as the harness computes
it (`<metric>_stderr,<filter>`: the sample standard error of the mean for accuracy-like metrics, bootstrap for
the rest). A difference is marked within noise when |tuned - base| <= 1.96 x sqrt(se_base^2 + se_tuned^2): the
two scores' 95% interval of a difference, treating the sides as independent samples (they share the questions,
so this is the cautious side: a paired test would call more differences real).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..io.safe_text import one_line

Z95 = 1.96


def _metric_keys(results: Mapping[str, Any]):
    for key, value in results.items():
        if "," not in key or "_stderr," in key or key == "alias":
            continue
        metric, _, flt = key.partition(",")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield metric, flt, key


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def within_noise(diff: float | None, se_b: float | None, se_t: float | None) -> bool | None:
    if diff is None or se_b is None or se_t is None:
        return None
    return abs(diff) <= Z95 * math.sqrt(se_b ** 2 + se_t ** 2)


def rows(base: Mapping[str, Any], tuned: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for task, t_res in tuned.get("results", {}).items():
        b_res = base.get("results", {}).get(task, {})
        n = (tuned.get("n_samples", {}).get(task) or {}).get("effective")
        for metric, flt, key in _metric_keys(t_res):
            b, t = _number(b_res.get(key)), _number(t_res.get(key))
            se_b = _number(b_res.get(f"{metric}_stderr,{flt}"))
            se_t = _number(t_res.get(f"{metric}_stderr,{flt}"))
            diff = None if b is None or t is None else t - b
            higher = (tuned.get("higher_is_better", {}).get(task) or {}).get(metric)
            out.append({"task": task, "metric": metric, "filter": flt, "base": b, "base_stderr": se_b,
                        "tuned": t, "tuned_stderr": se_t, "diff": diff,
                        "within_noise": within_noise(diff, se_b, se_t), "higher_is_better": higher, "n": n})
    return out


def build(plan, sides: Mapping[str, Any]) -> dict[str, Any]:
    table = rows(sides["base"], sides["tuned"])
    first = plan.tasks[0] if plan.tasks else None
    headline = next((r for r in table if r["task"] == first), table[0] if table else None)
    return {"tasks": plan.task_list.split(","), "limit": plan.limit, "fewshot": plan.fewshot,
            "base_model": plan.sides["base"]["model"], "tuned_model": plan.target.what,
            "lm_eval": sides["tuned"].get("lm_eval", ""), "rows": table, "headline": headline}


def _cell(value: float | None, se: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" ± {se:.2g}" if se is not None else "")


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}"


def markdown(section: Mapping[str, Any]) -> list[str]:
    settings = [f"tasks {', '.join(section['tasks'])}"]
    if section.get("limit"):
        settings.append(f"{section['limit']} rows per task")
    if section.get("fewshot") is not None:
        settings.append(f"{section['fewshot']}-shot")
    lines = ["## Benchmarks (lm-evaluation-harness)", "",
             (f"Base `{section['base_model']}` vs tuned ({section['tuned_model']}), lm-evaluation-harness "
              f"{section.get('lm_eval', '')}, {', '.join(settings)}. ± is the harness's standard error; "
              "\"within noise\": |difference| <= 1.96 x the two errors combined."),
             "", "| task | metric | base | tuned | difference | n |", "|---|---|---|---|---|---|"]
    for r in section["rows"]:
        mark = " (within noise)" if r["within_noise"] else ""
        metric = r["metric"] + (f" ({r['filter']})" if r["filter"] not in ("", "none") else "")
        lines.append(f"| {one_line(r['task'])} | {one_line(metric)} | {_cell(r['base'], r['base_stderr'])} | "
                     f"{_cell(r['tuned'], r['tuned_stderr'])} | {_signed(r['diff'])}{mark} | {r['n'] or '-'} |")
    return lines


def terminal(section: Mapping[str, Any]) -> list[str]:
    out = []
    for r in section["rows"]:
        mark = "  (within noise)" if r["within_noise"] else ""
        out.append(f"  {r['task']:<28} {r['metric']:<14} base {_cell(r['base'], r['base_stderr']):<16} "
                   f"tuned {_cell(r['tuned'], r['tuned_stderr']):<16} {_signed(r['diff'])}{mark}")
    return out


def headline(section: Mapping[str, Any] | None) -> str:
    """`make runs`' column: the first task's first metric and its change."""
    r = (section or {}).get("headline")
    if not r or r.get("tuned") is None:
        return ""
    return f"{r['task']} {r['metric']} {r['tuned']:.3g} ({_signed(r['diff'])})"
