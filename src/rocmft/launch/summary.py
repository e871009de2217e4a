"""The lines that close a run: what it did (from its events) and where its results are; for a failed run, the
job's lines that explain it. Returns lines; outcome.finish prints them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..run import events, runs
from . import joblog


def _world_size(run_dir: Path) -> int:
    try:
        plan = json.loads((run_dir / "plan.json").read_text())
        return int(plan.get("nproc_per_node", 1)) * int(plan.get("nnodes", 1))
    except (OSError, ValueError, TypeError):
        return 1


def memory_text(t: events.Totals) -> str | None:
    if t.peak_memory_gib is None:
        return None
    scope = f", {t.memory_scope}" if t.memory_scope and t.memory_scope != "this process" else ""
    if t.memory_kind == "gpu":
        return f"{t.peak_memory_gib:.2f} GiB per GPU (allocated{scope})"
    return f"{t.peak_memory_gib:.2f} GiB RSS per process (CPU{scope})"


def facts(run_dir: Path) -> dict[str, Any]:
    """What status.json keeps of the events, for `make runs` without re-reading them."""
    t = events.totals(events.read(run_dir))
    found = {"steps": t.last_step, "tokens_per_s_per_gpu": t.tokens_per_s_per_gpu,
             "final_loss": t.last_loss[1] if t.last_loss else None}
    if "reward_accuracy" in t.signals:
        found["reward_accuracy"] = t.signals["reward_accuracy"][1]
    return found


def _change(t: events.Totals, key: str, form: str) -> str | None:
    first, last = t.signals.get(key, (None, None))
    if first is None or last is None:
        return None
    return f"{form.format(first)} -> {form.format(last)}"


def stage_lines(t: events.Totals) -> list[str]:
    """A preference or KTO run's own signals, first logged step -> mean of the last logged steps."""
    tail = f"(step {t.first_loss[0]} -> mean of the last {min(3, t.steps_logged)} logged steps)" if t.first_loss else ""
    if t.stage == "dpo":
        parts = [f"accuracy {x}" for x in [_change(t, "reward_accuracy", "{:.2f}")] if x]
        parts += [f"margin {x}" for x in [_change(t, "reward_margin", "{:+.3f}")] if x]
        return [f"[rocmft] rewards    {', '.join(parts)} {tail}"] if parts else []
    if t.stage == "kto":
        parts = [f"kl {x}" for x in [_change(t, "kl", "{:.3f}")] if x]
        parts += [f"reward margin {x}" for x in [_change(t, "reward_margin", "{:+.3f}")] if x]
        return [f"[rocmft] kto        {', '.join(parts)} {tail}"] if parts else []
    return []


def done_lines(run_dir: Path, status: dict[str, Any]) -> list[str]:
    t = events.totals(events.read(run_dir))
    rel = runs.relative(run_dir)
    duration = (status["ended"] - status["started"]) if status.get("ended") and status.get("started") else None
    out = [f"[rocmft] done: {rel} ({events.clock(duration)})"]
    if t.last_step is not None:
        training = f" (training {events.clock(t.train_s)})" if t.train_s is not None else ""
        stage = f", stage {t.stage}" if t.stage and t.stage != "sft" else ""
        out.append(f"[rocmft] steps      {t.last_step}/{t.max_steps or '?'}{training}{stage}")
    if t.first_loss and t.last_loss:
        out.append(f"[rocmft] loss       {t.first_loss[1]:.4f} (step {t.first_loss[0]}) -> "
                   f"{t.last_loss[1]:.4f} (step {t.last_loss[0]})")
    out += stage_lines(t)
    if t.tokens_per_s_per_gpu:
        out.append(f"[rocmft] tokens/s   {t.tokens_per_s_per_gpu:,.0f} per GPU (mean over the logged steps)")
    memory = memory_text(t)
    if memory:
        out.append(f"[rocmft] peak mem   {memory}")
    output = run_dir / "output"
    if (output / "adapter_model.safetensors").is_file():
        out.append(f"[rocmft] adapter    {runs.relative(output)}/adapter_model.safetensors")
    elif (output / "model.safetensors").is_file() or list(output.glob("model-*.safetensors")):
        out.append(f"[rocmft] model      {runs.relative(output)}")
    if (output / "training_loss.png").is_file():
        out.append(f"[rocmft] loss plot  {runs.relative(output)}/training_loss.png")
    return out


def failed_lines(run_dir: Path, code: int, log_text: str, ranks: list[str]) -> list[str]:
    """The job's explaining lines, then which rank failed and where the whole output is (last, where the eye is)."""
    rel = runs.relative(run_dir)
    out = []
    explained = joblog.explain(log_text)
    if explained:
        out.append("[rocmft] the job's last lines that explain it:")
        out += [f"[rocmft]   | {line}" for line in explained]  # prefixed: a Slurm job prints these into train.log
    if ranks:
        out.append(f"[rocmft] FAILED (exit code {code}): {ranks[0]}")
        out += [f"[rocmft]   {line}" for line in ranks[1:]]
        if "killed by SIGKILL" in ranks[0]:
            out.append("[rocmft]   a rank killed by SIGKILL with no error of its own is often the kernel's OOM killer: "
                       "`journalctl -k | grep -i 'out of memory'` (or `dmesg`) says")
    elif _world_size(run_dir) == 1:
        out.append(f"[rocmft] FAILED (exit code {code}): rank 0 (the only process)")
    else:
        out.append(f"[rocmft] FAILED (exit code {code})")
    out.append(f"[rocmft] full output: {rel}/train.log")
    return out
