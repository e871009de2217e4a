"""Text for people: the full breakdown (`rocmft plan`), the one-screen summary (`make train`), a table row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..hardware import arches
from ..io import paths
from . import memory as mem
from . import evidence, suggest, throughput
from .workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from . import PlanResult


def count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}" if unit != "B" else f"{n / size:.2f}B"
    return f"{n:.0f}"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def size(gib: float) -> str:
    """A memory size for people: MiB below 1 GiB."""
    if gib < 1:
        return f"{gib * 1024:.0f} MiB"
    return f"{gib:.1f} GiB"


def cell(gib: float) -> str:
    if gib == 0:
        return "0"
    if gib < 0.01:
        return "<0.01"
    return f"{gib:.2f}"


def _unit(seconds: float) -> tuple[float, str]:
    if seconds < 90:
        return 1.0, "s"
    if seconds < 90 * 60:
        return 60.0, "min"
    if seconds < 48 * 3600:
        return 3600.0, "h"
    return 86400.0, "days"


def duration_range(lo: float, hi: float) -> str:
    """'3-6 min', '50 s-2 min': one unit when both ends share it."""
    (d_lo, u_lo), (d_hi, u_hi) = _unit(lo), _unit(hi)
    if u_lo == u_hi:
        fmt = "{:.1f}" if u_lo in ("h", "days") else "{:.0f}"
        a, b = fmt.format(lo / d_lo), fmt.format(hi / d_hi)
        return f"{a} {u_lo}" if a == b else f"{a}-{b} {u_lo}"
    return f"{duration(lo)}-{duration(hi)}"


def pct_range(r: tuple[float, float]) -> str:
    return f"{r[0] * 100:.0f}-{r[1] * 100:.0f}%" if r[0] != r[1] else f"{r[0] * 100:.0f}%"


def flops(n: float) -> str:
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} FLOP"


def tokens_rate(tps: tuple[float, float] | None) -> str:
    if tps is None:
        return "n/a"
    return f"{count(tps[0])}-{count(tps[1])}"


def method_text(result: PlanResult) -> str:
    w = result.workload
    if w is None:
        return "?"
    if w.method == "lora":
        text = f"{'Q' if w.quant_bits else ''}LoRA r{w.lora_rank}"
        if w.quant_bits:
            text += f" {w.quant_bits}-bit"
        return text
    if w.method == "freeze":
        return f"freeze ({w.freeze_layers} layers)"
    return "full" + (" pure_bf16" if w.pure_bf16 else "")


def nothing_fits() -> str:
    return (f"no combination of up to {suggest.MAX_CHANGES} changes fits (gradient checkpointing, DeepSpeed preset, "
            "micro-batch, Liger, lora_dropout, more GPUs or nodes, cutoff_len, LoRA, 4-bit): a GPU with more memory "
            "(plan.gpu_memory_gb) or a smaller model")


def verdict_text(plan: mem.MemoryPlan) -> str:
    if plan.capacity_gib is None:
        return "unknown (no GPU memory size for this arch)"
    return plan.verdict


def _relative(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(paths.root()))
    except (ValueError, OSError, FileNotFoundError):
        return path


def _header(result: PlanResult) -> list[str]:
    w = result.workload
    r = result.recipe
    assert w is not None
    m = w.model
    lines = [f"Plan for {r.name} ({_relative(r.path)})"]
    params = f"{m.params_text()} params" if m.is_moe else f"{count(m.total_params)} params"
    lines.append(f"  model     {m.name}: {params}, {m.num_hidden_layers} layers, hidden {m.hidden_size}, "
                 f"{m.num_attention_heads}/{m.num_key_value_heads} heads, vocab {m.vocab_size:,}  [{m.source}]")
    lines += [f"            {line}" for line in model_lines(m)]
    cap = f"{w.capacity_gib:g} GiB each" if w.capacity_gib else "GPU memory unknown"
    peak = f"{w.precision} peak {w.peak_tflops:g} TFLOP/s" if w.peak_tflops else f"no known {w.precision} peak"
    unit = "GPU(s)" if w.is_gpu else "process(es)"
    product = f" {w.product}" if w.product else ""
    lines.append(f"  hardware  {w.world_size} x {w.arch}{product} ({w.nodes} node(s) x {w.gpus_per_node} {unit}), {cap}, {peak}")
    others = [p for p in arches.get(w.arch).products if p != w.product] if w.product_source else []
    if w.product_source:
        lines.append(f"            {w.product}'s figures ({w.product_source})" + (
            f"; for another: SET=plan.product={'|'.join(others)}" if others and w.product_source != "plan.product" else ""))
    trainable = result.memory.trainable_params if result.memory else 0
    pct = f", {100 * trainable / m.total_params:.2f}% of the model" if w.method != "full" else ""
    ds = "no DeepSpeed" if w.deepspeed == "none" else f"DeepSpeed {w.deepspeed}"
    lines.append(f"  training  {method_text(result)} ({count(trainable)} trainable{pct}), {ds}, {w.precision}, "
                 f"micro-batch {micro_batch_text(w)} x {w.cutoff_len} tokens, accumulation {w.grad_accum} "
                 f"(global batch {w.global_batch}), checkpointing {'on' if w.gradient_checkpointing else 'off'}, "
                 f"attention {w.attention}")
    if w.stage in ("dpo", "kto"):
        lines.append(f"  stage     {stage_text(w)}")
    return lines


def model_lines(m) -> list[str]:
    """What the planner read beyond a dense decoder: experts, local attention, a vision tower."""
    out = []
    e = m.experts
    if e is not None:
        shared = f" + a shared expert ({e.shared_intermediate})" if e.shared_intermediate else ""
        leaf = f"; ZeRO-3 gathers each {e.leaf} whole ({count(e.block_params)} params)" if e.leaf else ""
        out.append(f"mixture of experts: {e.layers} MoE layers of {e.count} experts ({e.intermediate_size} wide), top-"
                   f"{e.top_k}{shared} per token; memory holds every expert, FLOPs count the active ones{leaf}")
    local = m.num_hidden_layers - m.layers_of("full_attention")
    if local:
        kinds = ", ".join(f"{m.layers_of(k)} {k}" for k in ("sliding_attention", "chunked_attention") if m.layers_of(k))
        out.append(f"attention: {kinds} (window {m.window:,} tokens), {m.layers_of('full_attention')} full_attention")
    if m.vision_params:
        out.append(f"vision tower + projector: {count(m.vision_params)} params (frozen; the plan is the language model's)")
    out += list(m.notes)
    return out


def micro_batch_text(w: Workload) -> str:
    if w.sequences_per_sample == 1:
        return str(w.micro_batch)
    return f"{w.micro_batch} pair{'s' if w.micro_batch > 1 else ''} = {w.micro_batch * 2} sequences"


def stage_text(w: Workload) -> str:
    """What a preference stage holds and runs beyond SFT (memory.py, throughput.py)."""
    loss = f"{w.stage} ({w.pref_loss})" if w.stage == "dpo" else w.stage
    reference = {"none": "no reference model", "adapter off": "reference = the model with the adapter off (no copy)",
                 "copy": "reference = a frozen copy of the model"}[w.reference]
    runs = {"dpo": "chosen + rejected per pair", "kto": "each answer + a KL sequence"}[w.stage]
    return f"{loss}: {runs}, {reference}, {w.extra_forwards} forward(s) without gradients per sequence"


def full(result: PlanResult) -> str:
    if result.memory is None or result.workload is None:
        return summary(result)
    plan = result.memory
    w = result.workload
    lines = _header(result)
    lines += ["", "Memory per GPU (GiB)" if w.is_gpu else "Memory per process (GiB; no GPU)"]
    width = max(len(c.label) for c in plan.components) + 2
    for c in plan.components:
        lines.append(f"  {c.label:<{width}}{cell(c.gib):>8}")
    lines.append("  " + "-" * (width + 8))
    total = size(plan.total_gib)
    if plan.capacity_gib:
        total += f" of {plan.capacity_gib:g} GiB ({plan.total_gib / plan.capacity_gib:.0%})"
    lines.append(f"  total, at the {plan.peak_phase} peak: {total}")
    if plan.eval_gib is not None:
        share = f" of {plan.capacity_gib:g} GiB ({plan.eval_gib / plan.capacity_gib:.0%})" if plan.capacity_gib else ""
        lines.append(f"  evaluation peak: {size(plan.eval_gib)}{share}  ({plan.eval_label}; the states above stay)")
    lines.append(f"  verdict: {verdict_text(plan)}   (fits below {mem.FITS_BELOW:.0%} of GPU memory, tight up to "
                 f"{mem.TIGHT_UP_TO:.0%}, above: does not fit)")
    if plan.host_gib_per_node:
        host = f"  host RAM: ~{plan.host_gib_per_node:.0f} GiB per node for the offloaded states (+ the processes' own RAM)"
        if w.host_memory_gb:
            host += f"; plan.host_memory_gb={w.host_memory_gb:g}: " + (
                "enough" if w.host_memory_gb >= plan.host_gib_per_node * 1.1 else "NOT enough")
        lines.append(host)
    for note in plan.notes:
        lines.append(f"  note: {note}")
    if result.suggestions:
        lines += ["", "Suggestions (by what they cost, then fastest first; speed is per GPU against the recipe as it is)"]
    else:
        lines += ["", "Suggestions: none"]
        if plan.capacity_gib is None:
            lines.append("  (no GPU memory size to plan against)")
        elif plan.verdict == "fits":
            lines.append("  (no change that fits is faster)")
        else:
            lines.append(f"  ({nothing_fits()})")
    tier = None
    for i, s in enumerate(result.suggestions, 1):
        if s.tier != tier:
            tier = s.tier
            lines.append(f"  {suggest.TIER_TEXT[tier]}:")
        lines.append(f"  {i}. {s.line()}")
    lines += ["", "Throughput"]
    tp = result.throughput
    if tp is not None:
        lines += batching_lines(result)
        active = " per token (active experts)" if w.model.is_moe else ""
        lines.append(f"  model FLOPs per token: {flops(tp.flops_per_token)}  (N = {count(w.model.matmul_params)} matmul weights"
                     f"{active}, L = {w.model.num_hidden_layers} layers, d = {w.model.q_dim}, s = "
                     f"{throughput.counted_span(w):,.0f} attended tokens)")
        for name, v in tp.flops_parts:
            lines.append(f"    {name}: {flops(v)}")
        if tp.tokens_per_s_gpu is not None:
            factors = ", ".join(f"{name} x{f:.2f}" for name, f in tp.factors) or "none"
            lines.append(f"  peak {tp.peak_tflops:g} TFLOP/s ({w.precision} dense, docker/arches.yaml); utilisation (MFU, "
                         f"recompute not counted) assumed {pct_range(tp.mfu)} ({w.mfu_source}); speed factors: {factors}")
            for name, (fast, slow) in tp.host:
                lines.append(f"  host time: {name} x{fast:.2f}" + (f" (fast end) to x{slow:.2f} (slow end)"
                                                                     if abs(fast - slow) > 0.005 else ""))
            lo, hi = tp.tokens_per_s_gpu
            lines.append(f"  => {count(lo)}-{count(hi)} real tokens/s per GPU, {count(lo * w.world_size)}-"
                         f"{count(hi * w.world_size)} for {w.world_size} GPU(s); effective utilisation after every "
                         f"factor {pct_range(tp.effective_mfu)} of the peak")
            unmeasured = evidence.unmeasured(w)
            if unmeasured:
                lines.append(f"  {unmeasured}")
        if tp.time is not None:
            t = tp.time
            bound = "<= " if t.upper_bound else ""
            text = f"  time: {t.what} = {t.steps:,} optimizer steps, {bound}{count(t.tokens)} tokens"
            if tp.tokens_per_s_gpu is not None:
                text += f": {bound}{duration_range(*t.seconds)}"
            lines.append(text)
            if t.upper_bound:
                lines.append(f"        (an upper bound: every sample counted at cutoff_len {w.cutoff_len})")
        for note in tp.notes:
            lines.append(f"  note: {note}")
    if result.problems:
        lines.append("")
        lines += [p.line() for p in result.problems]
    return "\n".join(lines)


PACKING_TEXT = {"padded": "padded to the longest row", "packing": "packing (samples see each other)",
                "neat_packing": "neat packing", "blocks": "text cut into full blocks, documents see each other"}


def batching_lines(result: PlanResult) -> list[str]:
    """What a micro-batch holds: real against computed tokens, and where the row lengths came from."""
    w = result.workload
    assert w is not None
    b = throughput.batches(w)
    lines = [f"  {result.lengths_note}"] if result.lengths_note else []
    if b is None:
        return lines
    fa2_cut = " (flash-attn: padding cut off)" if b.mode == "neat_packing" and w.attention == "fa2" else ""
    rows = (f"{b.rows // 2:,} pairs ({b.rows:,} sequences)" if w.sequences_per_sample > 1 else f"{b.rows:,} rows")
    lines.append(f"  micro-batch ({PACKING_TEXT[b.mode]}): {b.real:,.0f} real tokens of {b.computed:,.0f} computed, "
                 f"padding {b.padding:.0%}{fa2_cut}; {rows} per epoch"
                 + (f"; {b.truncated} rows over cutoff_len truncated" if b.truncated else ""))
    if b.mode == "padded" and w.stage == "sft":
        packed = throughput.batches(suggest._pack(w))
        if packed is not None:
            lines.append(f"  packed (neat_packing) it would hold {packed.real:,.0f} real tokens per micro-batch: see suggestions")
    return lines


def summary(result: PlanResult) -> str:
    """A few lines for `make train`: the verdict, the biggest components, speed, the best suggestion."""
    r = result.recipe
    if result.memory is None or result.workload is None:
        lines = [f"plan {r.name}: cannot plan memory - run goes ahead unchecked"]
        lines += ["  " + p.line() for p in result.problems]
        return "\n".join(lines)
    w = result.workload
    plan = result.memory
    ds = "" if w.deepspeed == "none" else f", {w.deepspeed}"
    gc = "on" if w.gradient_checkpointing else "off"
    moe = f" ({w.model.params_text()})" if w.model.is_moe else ""
    lines = [(f"plan {r.name}: {w.model.name.rsplit('/', 1)[-1]}{moe} {method_text(result)} on {w.world_size} x {w.arch}{ds}, "
              f"{w.precision}, {micro_batch_text(w)} x {w.cutoff_len} tokens, checkpointing {gc}")]
    if w.stage in ("dpo", "kto"):
        lines.append(f"  stage: {stage_text(w)}")
    top = sorted((c for c in plan.components if c.key != "reserve"), key=lambda c: -c.gib)[:3]
    rest = plan.total_gib - sum(c.gib for c in top)
    parts = ", ".join(f"{c.key} {c.gib:.1f}" for c in top) + f", other {rest:.1f}"
    if plan.capacity_gib:
        evaluation = f"; evaluation {plan.eval_gib:.1f}" if plan.eval_gib is not None else ""
        lines.append(f"  memory: {plan.total_gib:.1f}{evaluation} of {plan.capacity_gib:g} GiB per GPU ({plan.fraction:.0%}) "
                     f"-> {plan.verdict}   [{parts}]")
    else:
        lines.append(f"  memory: {size(plan.total_gib)} per process; {w.arch} has no GPU memory size: not checked")
    if plan.host_gib_per_node:
        lines.append(f"  host RAM: ~{plan.host_gib_per_node:.0f} GiB per node for the offloaded states")
    tp = result.throughput
    if tp is not None and tp.tokens_per_s_gpu is not None:
        b = throughput.batches(w)
        pad = f", {b.mode.replace('_', ' ')}, padding {b.padding:.0%}" if b is not None else ", rows at cutoff_len"
        text = (f"  speed: {tokens_rate(tp.tokens_per_s_gpu)} real tokens/s/GPU ({pct_range(tp.mfu)} of "
                f"{tp.peak_tflops:g} TFLOP/s{pad})")
        if tp.time is not None:
            bound = "<= " if tp.time.upper_bound else ""
            text += f"; {tp.time.what}: {bound}{duration_range(*tp.time.seconds)}"
        lines.append(text)
    elif tp is not None:
        lines.append(f"  speed: no known {w.precision} peak for {w.arch}: memory plan only")
    if result.suggestions:
        label = "try" if plan.verdict == "fits" else "fix"
        lines.append(f"  {label}: {result.suggestions[0].line()}")
    elif plan.verdict == "does not fit":
        lines.append(f"  fix: {nothing_fits()}")
    lines += ["  " + p.line() for p in result.problems if p.severity != "note"]
    lines.append(f"  (full breakdown: make plan RECIPE={r.name}, with the same SET=)")
    return "\n".join(lines)


TABLE_HEADER = ("recipe", "arch x GPUs x nodes", "method", "ZeRO", "packing", "GiB/GPU", "verdict", "real tokens/s/GPU")


def table_row(result: PlanResult) -> tuple[str, ...]:
    r = result.recipe
    hw = f"{r.arch} x {r.gpus_per_node} x {r.nodes}"
    if result.memory is None or result.workload is None:
        return (r.name, hw, "?", r.deepspeed, "?", "?", "cannot plan", "?")
    plan = result.memory
    cap = f"{plan.capacity_gib:g}" if plan.capacity_gib else "?"
    tps = result.throughput.tokens_per_s_gpu if result.throughput else None
    verdict = plan.verdict if plan.capacity_gib else "n/a (no GPU)"
    used = f"{plan.total_gib:.1f}" if plan.total_gib >= 0.1 else "<0.1"
    if plan.eval_gib is not None and plan.eval_gib > plan.total_gib:
        used += f" (eval {plan.eval_gib:.1f})"
    b = throughput.batches(result.workload)
    packing = {"padded": "no", "packing": "packing", "neat_packing": "neat"}[result.workload.packing]
    if b is not None:
        packing += f" ({b.padding:.0%} pad)"
    return (r.name, hw, method_text(result), result.workload.deepspeed, packing, f"{used}/{cap}", verdict,
            tokens_rate(tps) if tps else "n/a (no peak)")


def table(rows: list[tuple[str, ...]]) -> str:
    all_rows = [TABLE_HEADER, *rows]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(TABLE_HEADER))]
    out = []
    for n, row in enumerate(all_rows):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            out.append("  ".join("-" * wd for wd in widths))
    return "\n".join(out)
