"""Pure: the job's per-pass results -> eval.json (base and tuned side by side) and a short markdown table.
`make runs` reads the tuned eval loss back from eval.json (`tuned_loss`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..io import hostio
from .plan import EvalPlan, perplexity

JSON_NAME = "eval.json"
MARKDOWN_NAME = "eval.md"
# LLaMA-Factory's metric names (train/sft/metric.py ComputeSimilarity), as predict_<name> in its results.
GENERATION_METRICS = ("bleu-4", "rouge-1", "rouge-2", "rouge-l")


def side(results: Mapping[str, Any], who: str) -> dict[str, Any]:
    loss_metrics = results[f"{who}.loss"]["metrics"]
    predict = results[f"{who}.predict"]
    loss = loss_metrics.get("eval_loss")
    out: dict[str, Any] = {"eval_loss": loss, "perplexity": perplexity(loss)}
    for name in GENERATION_METRICS:
        out[name] = predict["metrics"].get(f"predict_{name}")
    out["generated_rows"] = predict.get("rows")
    return out


def build(plan: EvalPlan, results: Mapping[str, Any]) -> dict[str, Any]:
    base, tuned = side(results, "base"), side(results, "tuned")
    examples = []
    for b, t in zip(results["base.predict"]["predictions"], results["tuned.predict"]["predictions"]):
        examples.append({"prompt": t.get("prompt", ""), "reference": t.get("label", ""),
                         "base": b.get("predict", ""), "tuned": t.get("predict", "")})
    loss = results["base.loss"]
    held_out = {"rows": loss["held_out_rows"], "copies": loss["held_out_copies"]} \
        if plan.data == "held-out" and loss.get("held_out_copies") is not None else None
    return {"run": plan.target.run_path, "data": plan.data, "rows": plan.rows,
            "base_model": plan.passes["base.loss"]["model_name_or_path"], "tuned_model": plan.target.what,
            "template": plan.target.template, "base": base, "tuned": tuned, "examples": examples,
            "held_out": held_out}


def copies_line(report: Mapping[str, Any]) -> str:
    """How many held-out rows the run also trained on, word for word (None in reports written before it)."""
    held = report.get("held_out")
    if not held:
        return ""
    if not held["copies"]:
        return f"held out: {held['rows']} rows, none of them a copy of a training row"
    return (f"held out: {held['rows']} rows, {held['copies']} of them token for token rows the run trained on: "
            "their scores show what it memorised, not what it learned (DATA=<a set it never saw>, or `make data "
            "DEDUP=1`)")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value)


def markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# eval: {report['run']}", "",
             (f"Base `{report['base_model']}` vs tuned ({report['tuned_model']}), on {report['data']} rows "
              f"(generation: greedy, up to {report['rows']} rows)."), *([copies_line(report) + "."] if copies_line(report) else []), "",
             "| metric | base | tuned |", "|---|---|---|"]
    for key in ("eval_loss", "perplexity", *GENERATION_METRICS, "generated_rows"):
        lines.append(f"| {key} | {_cell(report['base'].get(key))} | {_cell(report['tuned'].get(key))} |")
    for i, ex in enumerate(report["examples"], 1):
        lines += ["", f"**Example {i}.** {_one_line(ex['prompt'])}", "",
                  f"- reference: {_one_line(ex['reference'])}", f"- base: {_one_line(ex['base'])}",
                  f"- tuned: {_one_line(ex['tuned'])}"]
    return "\n".join(lines) + "\n"


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def terminal(report: Mapping[str, Any]) -> list[str]:
    """The side-by-side for the terminal: the table rows and one example."""
    rows = [("", "base", "tuned")]
    for key in ("eval_loss", "perplexity", *GENERATION_METRICS):
        rows.append((key, _cell(report["base"].get(key)), _cell(report["tuned"].get(key))))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(width[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    if copies_line(report):
        lines.append(copies_line(report))
    for ex in report["examples"][:1]:
        lines += [f"prompt:    {_one_line(ex['prompt'], 120)}", f"reference: {_one_line(ex['reference'], 120)}",
                  f"base:      {_one_line(ex['base'], 120)}", f"tuned:     {_one_line(ex['tuned'], 120)}"]
    return lines


def write(run_dir: Path, report: Mapping[str, Any] | None = None, *,
          harness: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """eval.json and eval.md in the run dir (each written whole under a fresh name, then renamed: never half
    a file, never through a link a job left at either name). The held-out report and the harness's benchmarks
    (key "harness", `make eval TASKS=`) are two sections of one file: writing one keeps the other."""
    from . import harness_report

    try:
        existing = dict(hostio.read_json(run_dir / JSON_NAME) or {})
    except (OSError, ValueError, TypeError):
        existing = {}
    if report is not None:
        data = dict(report)
        if isinstance(existing.get("harness"), Mapping):
            data["harness"] = existing["harness"]
    else:
        data = {k: v for k, v in existing.items() if k != "harness"} if "base" in existing else {}
        data.setdefault("run", run_dir.name)
    if harness is not None:
        data["harness"] = dict(harness)
    text = markdown(data) if "base" in data else f"# eval: {data.get('run', run_dir.name)}\n"
    if isinstance(data.get("harness"), Mapping):
        text += "\n" + "\n".join(harness_report.markdown(data["harness"])) + "\n"
    out = []
    for name, body in ((JSON_NAME, json.dumps(data, indent=2) + "\n"), (MARKDOWN_NAME, text)):
        path = run_dir / name
        hostio.write_text(path, body)
        out.append(path)
    return out[0], out[1]


def harness_headline(run_dir: Path) -> str:
    """The harness's headline (first task, first metric, its change) of the run's last `make eval TASKS=`."""
    from . import harness_report

    try:
        section = (hostio.read_json(run_dir / JSON_NAME) or {}).get("harness")
    except (OSError, ValueError, TypeError, AttributeError):
        return ""
    return harness_report.headline(section) if isinstance(section, Mapping) else ""


def tuned_loss(run_dir: Path) -> float | None:
    """The tuned eval loss of the run's last `make eval`, for `make runs`."""
    try:
        value = (hostio.read_json(run_dir / JSON_NAME) or {})["tuned"]["eval_loss"]
    except (KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None
