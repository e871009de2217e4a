"""`make bench-report`'s output: the table of measured and predicted figures, its notes, and the plot."""

from __future__ import annotations

from pathlib import Path

from .prediction import ReportLine, float_or_none


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    if value is None:
        return "-"
    return "0%" if round(value) == 0 else f"{value:+.0f}%"


def render_table(lines: list[ReportLine]) -> str:
    head = ("#", "date", "arch", "gpu", "n", "recipe", "method", "zero", "cutoff/mb/ga",
            "tok/s/GPU", "pred", "err", "mem GiB", "pred", "err", "MFU", "pred MFU", "p50/p90 s")
    body = []
    for r in lines:
        row, pred = r.row, r.pred
        tps_pred = "-" if not pred.tokens_per_s else f"{_num(pred.tokens_per_s[0])}-{_num(pred.tokens_per_s[1])}"
        mfu = float_or_none(row.get("mfu"))
        pred_mfu = "-" if not pred.mfu else f"{pred.mfu[0]:.2f}-{pred.mfu[1]:.2f}"
        body.append((
            str(r.number), (row.get("date") or "")[:10], row.get("arch", ""), row.get("gpu_model", ""),
            row.get("gpu_count", ""), row.get("recipe", ""), row.get("method", ""), row.get("zero_stage", ""),
            f"{row.get('cutoff_len')}/{row.get('micro_batch')}/{row.get('grad_accum')}",
            _num(r.tps), tps_pred, _pct(r.tps_err),
            _num(r.mem) + ("" if r.mem_comparable else " rss"), _num(pred.memory_gib), _pct(r.mem_err) if r.mem_comparable else "n/c",
            "-" if mfu is None else f"{mfu:.3f}", pred_mfu,
            f"{_num(float_or_none(row.get('step_time_p50_s')))}/{_num(float_or_none(row.get('step_time_p90_s')))}",
        ))
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [fmt(head), fmt(tuple("-" * w for w in widths))]
    out += [fmt(b) for b in body]
    return "\n".join(out)


def render_notes(lines: list[ReportLine]) -> list[str]:
    notes = []
    for r in lines:
        for note in r.pred.notes:
            notes.append(f"#{r.number}: {note}")
        if r.pred.plan_total_gib is not None and r.mem_comparable:
            notes.append(f"#{r.number}: planner total {r.pred.plan_total_gib:.2f} GiB per GPU, of which "
                         f"{r.pred.plan_total_gib - (r.pred.memory_gib or 0):.2f} GiB is HIP context/RCCL outside "
                         f"torch's allocator (pred column: the rest)")
        if not (r.row.get("mfu") or "").strip():
            notes.append(f"#{r.number}: MFU empty: no known {r.row.get('precision')} peak for arch `{r.row.get('arch')}`")
    return notes


def plot(lines: list[ReportLine], out: Path) -> Path:
    """Measured vs predicted tokens/s/GPU and memory, one bar pair per row (matplotlib, Agg, imported here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"#{r.number} {r.row.get('recipe')}\n{r.row.get('gpu_model')} x{r.row.get('gpu_count')}" for r in lines]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.7 * max(len(lines), 1)), squeeze=False)
    ys = list(range(len(lines)))
    h = 0.38
    ax = axes[0][0]
    ax.barh([y - h / 2 for y in ys], [r.tps or 0 for r in lines], h, label="measured", color="#c00000")
    mids = [sum(r.pred.tokens_per_s) / 2 if r.pred.tokens_per_s else 0 for r in lines]
    errs = [[m - r.pred.tokens_per_s[0] if r.pred.tokens_per_s else 0 for m, r in zip(mids, lines)],
            [r.pred.tokens_per_s[1] - m if r.pred.tokens_per_s else 0 for m, r in zip(mids, lines)]]
    ax.barh([y + h / 2 for y in ys], mids, h, xerr=errs, label="planner (range)", color="#7f7f7f", capsize=3)
    ax.set_title("tokens/s per GPU")
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    ax.legend(fontsize=7)
    ax = axes[0][1]
    ax.barh([y - h / 2 for y in ys], [r.mem or 0 for r in lines], h, label="measured (CPU rows: RSS)", color="#c00000")
    ax.barh([y + h / 2 for y in ys], [r.pred.memory_gib or 0 for r in lines], h, label="planner", color="#7f7f7f")
    ax.set_title("peak memory per GPU (GiB)")
    ax.set_yticks(ys, [f"#{r.number}" for r in lines], fontsize=7)
    ax.invert_yaxis()
    ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
