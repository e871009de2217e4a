"""benchmarks/gpu_truth.py's output format, and its measured rows against the planner of this checkout.

The format is what a GPU owner sends back (docs/bench.md): its columns and the table are pinned here. The
measured H200 rows (results/gpu_truth-nvidia-h200.csv, a real run) are re-planned with the current planner
and held to 15%: the planner's terms they corrected (padded micro-batch memory, the host floor, ZeRO-3's
hooks) cannot drift back unnoticed. Known misses are listed with why; one that comes back within 15% fails
too, so the list stays true.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import sys

import pytest

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location("gpu_truth", ROOT / "benchmarks" / "gpu_truth.py")
gpu_truth = sys.modules.setdefault("gpu_truth", importlib.util.module_from_spec(SPEC))  # dataclasses look it up
SPEC.loader.exec_module(gpu_truth)

MEASURED = ROOT / "results" / "gpu_truth-nvidia-h200.csv"
# (config, what): why it is still off; measured with benchmarks/gpu_truth.py on an H200, 2026-12-04.
KNOWN_MISSES = {
    ("lora-neat-z3", "memory"): "ZeRO-3 on one process held 28 GB more than planned; a second run "
                                "(results/gpu_truth-nvidia-h200-z3memory.*) ruled out fp32 weights and Liger "
                                "being off. DeepSpeed's linear swap (memory_efficient_linear: frozen projections "
                                "keep their inputs) is now planned, 11.3 GiB: 1.37 -> 1.18; the other ~16 GiB are "
                                "not attributed (docs/bench.md; gpu_truth's z3-lean and z3-swap-only rows will say)",
}


def _result(name: str, status: str, metrics: dict, pred) -> object:
    res = gpu_truth.Result(gpu_truth.Config(name, "llama3-8b-lora", ("neat_packing=false",), "x"),
                           ["neat_packing=false", "plan.product=H200"], status=status, metrics=metrics)
    res.prediction, res.verdict = pred, "fits"
    return res


class _Pred:
    tokens_per_s = (4000.0, 6000.0)
    memory_gib = 50.0
    notes: list = []


def test_csv_columns_and_values_are_pinned():
    metrics = {"measured_steps": 4, "step_time_mean_s": 1.2345, "real_tokens_per_s_per_gpu": 5500.4,
               "peak_memory": {"allocated_gib": 49.0, "reserved_gib": 51.5}}
    rows = [gpu_truth.row(_result("a", "ok", metrics, _Pred()), "NVIDIA H200", "H200"),
            gpu_truth.row(_result("b", "failed (1)", {}, None), "NVIDIA H200", "H200")]
    text = gpu_truth.to_csv(rows, "gpu_truth 2026-12-04: NVIDIA H200\nversions: torch 2.11.0")
    lines = text.splitlines()
    assert lines[:2] == ["# gpu_truth 2026-12-04: NVIDIA H200", "# versions: torch 2.11.0"]
    assert lines[2].split(",") == list(gpu_truth.COLUMNS)
    first, second = csv.DictReader(io.StringIO("\n".join(lines[2:])))
    assert first["real_tokens_per_s"] == "5500" and first["ratio_tokens_per_s"] == "1.10"  # 5500.4 / 5000
    assert first["peak_reserved_gib"] == "51.50" and first["ratio_memory"] == "1.03"  # 51.5 / 50
    assert first["step_time_s"] == "1.234" or first["step_time_s"] == "1.235"
    assert second["status"] == "failed (1)" and second["ratio_tokens_per_s"] == "" and second["ratio_memory"] == ""


def test_markdown_table_is_pinned():
    metrics = {"measured_steps": 4, "step_time_mean_s": 1.0, "real_tokens_per_s_per_gpu": 6000.0,
               "peak_memory": {"allocated_gib": 70.0, "reserved_gib": 72.0}}
    text = gpu_truth.to_markdown([gpu_truth.row(_result("lora-neat", "ok", metrics, _Pred()), "g", "H200")], "head")
    lines = text.splitlines()
    assert lines[2] == ("| config | status | step s | real tok/s | planned tok/s | tok/s ratio | peak alloc GiB | "
                        "peak reserved GiB | planned GiB | memory ratio |")
    assert lines[4] == "| lora-neat | ok | 1.000 | 6000 | 4000-6000 | 1.20 | 70.00 | 72.00 | 50.00 | 1.44 |"


def test_ratio_is_measured_over_planned_and_empty_without_either():
    assert gpu_truth.ratio(120.0, 100.0) == pytest.approx(1.2)
    assert gpu_truth.ratio(None, 100.0) is None and gpu_truth.ratio(1.0, None) is None and gpu_truth.ratio(1.0, 0) is None


def test_the_bundle_is_pinned_by_the_lock():
    pins = gpu_truth.lock_pins()
    assert [n for n in gpu_truth.BUNDLE if n not in pins] == []
    assert pins["llamafactory"] == "0.9.5"  # LLaMA-Factory 0.9.5 needs transformers <= 5.6: the bundle brings it
    assert "transformers" in gpu_truth.BUNDLE and "torch" not in gpu_truth.BUNDLE  # the machine's own torch stays


def test_real_tokens_count_what_the_collator_was_handed():
    from rocmft.callbacks.metrics import feature_tokens

    packed = {"input_ids": [5] * 7, "attention_mask": [1, 1, 2, 2, 2, 0, 0], "labels": [-100] * 7}
    padded = {"input_ids": [5, 6, 7]}  # no mask: every token is real
    pair = {"chosen_input_ids": [1] * 4, "chosen_attention_mask": [1, 1, 1, 0],
            "rejected_input_ids": [1] * 4, "rejected_attention_mask": [1, 1, 0, 0]}
    assert feature_tokens([packed]) == 5  # segment ids count, pack padding does not
    assert feature_tokens([padded]) == 3
    assert feature_tokens([pair]) == 5


@pytest.mark.real_tokens
def test_measured_h200_rows_are_within_15_percent_of_the_planner(tmp_path, tiny_model, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub-cache"))
    header, rows = gpu_truth.read_csv(MEASURED)
    assert "NVIDIA H200" in header[0] and all(r["status"] == "ok" for r in rows)
    off, misses = [], set()
    for r in gpu_truth.replanned(rows, tmp_path):
        for what, key in (("tokens/s", "now_ratio_tokens_per_s"), ("memory", "now_ratio_memory")):
            value = float(r[key])
            if abs(value - 1) > 0.15:
                if (r["config"], what) in KNOWN_MISSES:
                    misses.add((r["config"], what))
                else:
                    off.append(f"{r['config']} {what}: measured/planned {value:.2f}")
    assert off == [], "the planner moved away from the H200 measurements: " + "; ".join(off)
    assert misses == set(KNOWN_MISSES), f"a known miss is now within 15%: {set(KNOWN_MISSES) - misses} (update the list)"


def test_the_next_matrix_is_one_command_that_ends_within_nine_minutes_and_writes_its_own_files():
    """`make gpu-truth MATRIX=next` hands only `--matrix next`: the run gets its 520 s deadline and its `-next` files
    (the measured H200 CSV is never overwritten); what the user gives wins, and a CPU rehearsal keeps its names."""
    given = gpu_truth.parse(["run", "--matrix", "next"])
    assert (given.tag, given.deadline) == ("next", 520)
    assert gpu_truth.parse(["run", "--matrix", "next", "--deadline", "300", "--tag", "mine"]).deadline == 300
    assert gpu_truth.parse(["run", "--matrix", "next", "--tag", "mine"]).tag == "mine"
    assert (gpu_truth.parse(["run"]).tag, gpu_truth.parse(["run"]).deadline) == ("", None)
    assert gpu_truth.parse(["run", "--dry-run", "--matrix", "next"]).tag == ""
