"""The measured rows as a CSV and a table, and a measured CSV beside the planner as it is now."""

from __future__ import annotations

import csv
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

from . import ROOT, SRC
from .matrix import Config, Result, predict
from .model import demo_data, model_config, shape_only

COLUMNS = ("config", "recipe", "overrides", "status", "gpu", "product", "steps_measured",
           "step_time_s", "real_tokens_per_s", "pred_tokens_per_s_lo", "pred_tokens_per_s_hi", "ratio_tokens_per_s",
           "peak_allocated_gib", "peak_reserved_gib", "pred_memory_gib", "ratio_memory", "pred_verdict", "note")



def _num(value, digits=1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def ratio(measured: float | None, predicted: float | None) -> float | None:
    """measured / predicted: 1.0 when the planner was right, >1 when the GPU did more (or used more)."""
    if measured is None or predicted in (None, 0):
        return None
    return measured / predicted


def row(res: Result, gpu: str, product: str) -> dict[str, str]:
    m, pred = res.metrics, res.prediction
    peak = m.get("peak_memory") or {}
    real_tps = m.get("real_tokens_per_s_per_gpu")
    lo_hi = getattr(pred, "tokens_per_s", None)
    mid = sum(lo_hi) / 2 if lo_hi else None
    mem_pred = getattr(pred, "memory_gib", None)
    reserved = peak.get("reserved_gib")
    notes = [res.note] if res.note else []
    notes += getattr(pred, "notes", []) or []
    return {
        "config": res.config.name, "recipe": res.config.recipe, "overrides": " ".join(res.overrides),
        "status": res.status, "gpu": gpu, "product": product,
        "steps_measured": str(m.get("measured_steps", "")),
        "step_time_s": _num(m.get("step_time_mean_s"), 3),
        "real_tokens_per_s": _num(real_tps, 0),
        "pred_tokens_per_s_lo": _num(lo_hi[0], 0) if lo_hi else "",
        "pred_tokens_per_s_hi": _num(lo_hi[1], 0) if lo_hi else "",
        "ratio_tokens_per_s": _num(ratio(real_tps, mid), 2),
        "peak_allocated_gib": _num(peak.get("allocated_gib"), 2),
        "peak_reserved_gib": _num(reserved, 2),
        "pred_memory_gib": _num(mem_pred, 2),
        "ratio_memory": _num(ratio(reserved, mem_pred), 2),
        "pred_verdict": res.verdict,
        "note": "; ".join(n.replace("\n", " ") for n in notes)[:300],
    }


def to_csv(rows: list[dict[str, str]], header: str) -> str:
    buf = io.StringIO()
    for line in header.splitlines():
        buf.write(f"# {line}\n")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


MD_COLUMNS = (("config", "config"), ("status", "status"), ("step s", "step_time_s"),
              ("real tok/s", "real_tokens_per_s"), ("planned tok/s", None), ("tok/s ratio", "ratio_tokens_per_s"),
              ("peak alloc GiB", "peak_allocated_gib"), ("peak reserved GiB", "peak_reserved_gib"),
              ("planned GiB", "pred_memory_gib"), ("memory ratio", "ratio_memory"))


def to_markdown(rows: list[dict[str, str]], header: str) -> str:
    lines = [*(f"{h}  " for h in header.splitlines()), "",
             "| " + " | ".join(h for h, _ in MD_COLUMNS) + " |", "|" + "---|" * len(MD_COLUMNS)]
    for r in rows:
        planned = f"{r['pred_tokens_per_s_lo']}-{r['pred_tokens_per_s_hi']}" if r["pred_tokens_per_s_lo"] else ""
        cells = [planned if key is None else (r[key] or "-") for _, key in MD_COLUMNS]
        lines.append("| " + " | ".join(c or "-" for c in cells) + " |")
    lines += ["", "Ratios are measured / planned (tokens/s against the middle of the planned range; memory: torch's "
              "peak reserved against the plan without its runtime reserve). Real tokens: what the collator was "
              "handed, before padding or packing."]
    return "\n".join(lines) + "\n"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(the header comment lines, the rows) of a gpu_truth CSV."""
    lines = path.read_text().splitlines()
    header = [line[2:] for line in lines if line.startswith("# ")]
    body = [line for line in lines if not line.startswith("#")]
    return header, list(csv.DictReader(body))


def replanned(rows: list[dict[str, str]], work: Path, steps: int = 6) -> list[dict[str, str]]:
    """Each measured row re-planned by the current planner: the run's model shape and data rebuilt here
    (config.json and the tiny tokenizer, no weights; the demo rows repeated as `run` does)."""
    sys.path.insert(0, str(SRC))
    from rocmft.plan import models
    from rocmft.recipe import recipes

    tiny = ROOT / "models" / "tiny-llama"
    if not (tiny / "config.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py")], check=True, cwd=ROOT)
    demo_data(work / "data", 20)
    out = []
    for r in rows:
        overrides = shlex.split(r["overrides"])
        model = next(o.split("=", 1)[1] for o in overrides if o.startswith("model_name_or_path="))
        spec = models.from_table(recipes.load(r["recipe"]).llamafactory["model_name_or_path"])
        local = shape_only(model_config(spec, tiny), tiny, work / Path(model).name)
        fixed = [f"model_name_or_path={local}" if o.startswith("model_name_or_path=") else
                 f"dataset_dir={work / 'data'}" if o.startswith("dataset_dir=") else o for o in overrides]
        res = Result(Config(r["config"], r["recipe"], (), ""), fixed, status=r["status"])
        predict(res, steps)
        lo_hi = getattr(res.prediction, "tokens_per_s", None)
        mem = getattr(res.prediction, "memory_gib", None)
        measured_tps, measured_mem = float(r["real_tokens_per_s"] or 0) or None, float(r["peak_reserved_gib"] or 0) or None
        out.append({**r, "now_tokens_per_s": f"{lo_hi[0]:.0f}-{lo_hi[1]:.0f}" if lo_hi else "",
                    "now_ratio_tokens_per_s": _num(ratio(measured_tps, sum(lo_hi) / 2 if lo_hi else None), 2),
                    "now_memory_gib": _num(mem, 2), "now_ratio_memory": _num(ratio(measured_mem, mem), 2)})
    return out


def report(args) -> int:
    path = Path(args.csv)
    header, rows = read_csv(path)
    now = replanned(rows, Path(args.work).resolve())
    cols = ("config", "real_tokens_per_s", "pred_tokens_per_s_lo", "ratio_tokens_per_s", "now_tokens_per_s",
            "now_ratio_tokens_per_s", "peak_reserved_gib", "pred_memory_gib", "ratio_memory", "now_memory_gib",
            "now_ratio_memory")
    names = ("config", "real tok/s", "planned then", "ratio then", "planned now", "ratio now", "reserved GiB",
             "planned GiB then", "ratio then", "planned GiB now", "ratio now")
    lines = [*(f"{h}  " for h in header), "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for r in now:
        then = f"{r['pred_tokens_per_s_lo']}-{r['pred_tokens_per_s_hi']}" if r["pred_tokens_per_s_lo"] else "-"
        cells = [then if c == "pred_tokens_per_s_lo" else (r.get(c) or "-") for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "then: the planner when the row was measured; now: the planner of this checkout (measured / planned)."]
    text = "\n".join(lines) + "\n"
    if args.write:
        path.with_suffix(".md").write_text(text)
    print(text)
    return 0
