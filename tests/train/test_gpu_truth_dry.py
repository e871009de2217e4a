"""benchmarks/gpu_truth.py --dry-run for real on CPU (`pytest -m train`): the very code a GPU owner runs
(random model built by the same function, the demo rows repeated, two `rocmft bench` runs through LLaMA-Factory,
the planner beside each, the CSV and table written), on the tiny model, so the script cannot rot. No timing
claim is made or checked here: the CSV's header says DRY RUN. The run is the session's `gpu_truth_dry`
(tests/conftest.py), whose two bench runs tests/train/test_bench_cpu.py reads too."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from tests.conftest import ROOT, GpuTruthDry

pytestmark = pytest.mark.train


def test_dry_run_measures_two_configurations_end_to_end(gpu_truth_dry: GpuTruthDry):
    text = (gpu_truth_dry.work / "gpu_truth-cpu.csv").read_text()
    lines = text.splitlines()
    assert "DRY RUN" in lines[0]
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in lines if not line.startswith("#")))))
    assert [r["config"] for r in rows] == ["lora-neat", "lora-padded"]
    assert all(r["status"] == "ok" and r["steps_measured"] == str(gpu_truth_dry.steps - 2) for r in rows)
    # real tokens come from the collator's features: present for both, and a neat-packed micro-batch holds
    # pack padding that the Trainer's "all" count includes and the real count does not
    assert all(float(r["real_tokens_per_s"]) > 0 for r in rows)
    metrics = json.loads((gpu_truth_dry.work / "gpu_truth-cpu-metrics.json").read_text())
    neat = metrics["lora-neat"]
    assert 0 < neat["measured_real_tokens"] < neat["measured_tokens"]
    # the next GPU run (issue 48), rehearsed: each configuration rendered (its DeepSpeed variant JSON too) and planned
    # for an 80 GB card, whose rows are 4,096 tokens; none is trained here (the two runs above are the CPU's part)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gputruth.matrix import NEXT_MATRIX

    listed = gpu_truth_dry.output[gpu_truth_dry.output.index("configurations a GPU run would measure"):]
    assert "cutoff_len=4096" in listed.splitlines()[0] and "plan.product=H100" in listed.splitlines()[0]
    for cfg in NEXT_MATRIX:
        assert f"  {cfg.name}: renders; planned " in listed, cfg.name
    persist = json.loads((gpu_truth_dry.work / "ds" / "persist-only.json").read_text())["zero_optimization"]
    assert persist["stage3_param_persistence_threshold"] == 10**10 and "memory_efficient_linear" not in persist
    # the table is printed last, and nothing was written into the project's results/
    assert gpu_truth_dry.output.rstrip().splitlines()[-1].startswith("Ratios are measured / planned")
    assert not (ROOT / "results" / "gpu_truth-cpu.csv").exists()
