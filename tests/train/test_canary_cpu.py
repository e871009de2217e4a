"""`rocmft canary` for real on CPU (`pytest -m train`): the tiny model trained through `make train`'s path
(pipeline.prepare, the local runtime, the worker, LLaMA-Factory's Trainer), read back from the runs' events."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, make_env, offline_env, rocmft

pytestmark = pytest.mark.train


def _canary(tmp: Path, *sets: str, train: bool = False):
    if train:  # `make train CANARY=1`: the canary first, the training only if it agrees
        proc = subprocess.run(["make", "-s", "train", "RECIPE=tiny-cpu", "CANARY=1", f"SET={' '.join(sets)}"], cwd=ROOT,
                              env=make_env(tmp), capture_output=True, text=True, timeout=900)
    else:
        proc = rocmft("canary", "tiny-cpu", *(["--set", " ".join(sets)] if sets else []), env=offline_env(tmp))
    folders = [p for p in (tmp / "runs").iterdir() if (p / "canary.json").is_file()]
    assert len(folders) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((folders[0] / "canary.json").read_text())


def _trainer_steps(run: str) -> list[float]:
    """Loss and grad norm of each step, in turn, as the Trainer itself logged them (trainer_state.json's
    log_history), not as the canary read them from the progress events."""
    state = json.loads((_run_dir(run) / "output" / "trainer_state.json").read_text())
    return [x for e in state["log_history"] if "loss" in e and "grad_norm" in e for x in (e["loss"], e["grad_norm"])]


def test_bf16_agrees_with_the_fp32_reference(tmp_path, tiny_model):
    """A real comparison that must agree: tiny-cpu in bf16 (use_cpu: autocast on CPU, as a GPU recipe computes)
    against the fp32 reference, two runs from the same rounded weights. Their numbers differ (bf16 rounds), by less
    than the tolerance: a tolerance too tight for bf16, or a comparison of the wrong steps, is a false alarm here.
    Measured here (2026-12-06): worst relative difference 1.8e-3 (grad norm, step 1) against 7.8e-3."""
    proc, record = _canary(tmp_path, "precision=bf16", "use_cpu=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert record["verdict"] == "agrees", record["detail"]
    assert record["numerics"] == {"precision": "bf16", "attention": "sdpa", "liger": False, "packing": "neat"}
    assert record["reference"] == {**record["numerics"], "precision": "fp32"}
    tested, ref = record["runs"]["recipe"], record["runs"]["reference"]
    assert tested["run"] != ref["run"]  # two runs
    for run in (tested, ref):  # the steps compared are the ones each Trainer logged
        assert [s["step"] for s in run["steps"]] == [1, 2, 3, 4]
        assert [x for s in run["steps"] for x in (s["loss"], s["grad_norm"])] == pytest.approx(_trainer_steps(run["run"]))
    pairs = [(a[q], b[q]) for a, b in zip(tested["steps"], ref["steps"]) for q in ("loss", "grad_norm")]
    assert any(a != b for a, b in pairs)  # bf16 really rounded: not one run compared with itself
    assert 0 < record["worst"]["ratio"] <= 1 and record["bisection"] == [] and record["restored_by"] is None
    args = {k: yaml.safe_load((_run_dir(record["runs"][k]["run"]) / "train.yaml").read_text()) for k in ("recipe", "reference")}
    assert (args["recipe"]["bf16"], args["recipe"]["use_cpu"], args["recipe"]["model_name_or_path"]) == (True, True, "models/tiny-llama-bf16")
    assert (args["reference"]["bf16"], args["reference"]["model_name_or_path"]) == (False, "models/tiny-llama-bf16-fp32")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("canary ")]
    assert len(lines) == 1 and "bf16 vs fp32 reference): agrees" in lines[0] and "canary.json" in lines[0]


def test_fp16_overflow_is_caught_and_precision_named(tmp_path, tiny_model):
    """A real fp16 overflow, not a planted one. The canary's model is stored in fp16 (LLaMA-Factory loads a
    checkpoint's own dtype), and on a CPU accelerate gives fp16 neither autocast nor a GradScaler: fp16 weights
    and activations, no loss scaling. At learning rate 3.0 the LoRA update of step 2 (grad norm ~65 in both
    runs) makes step 3's activations pass fp16's largest value, 65504: the loss is NaN. The fp32 reference,
    from the same rounded weights (widened exactly), stays finite. Measured here (2026-12-04):
      fp16: loss 7.24761, 7.04328, nan, nan; grad norm 2.4513, 67.320, nan, nan
      fp32: loss 7.24764, 7.04440, 7.36591, 6.94331; grad norm 2.4512, 65.470, 0.5007, 0.1849
    (steps 1-2 agree within 1.6e-4 relative, inside fp16's 2ku = 9.8e-4 / 2.0e-3 tolerance)."""
    # use_cpu makes the fp16 recipe itself launchable on CPU: only the failed canary stops `make train` here.
    proc, record = _canary(tmp_path, "precision=fp16", "use_cpu=true", "learning_rate=3.0", train=True)
    assert proc.returncode != 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    canary_runs = {p.name for p in (tmp_path / "runs").iterdir()}
    assert all("-canary-" in name for name in canary_runs), canary_runs  # no training run was launched
    assert record["verdict"] == "non-finite"
    assert record["numerics"]["precision"] == "fp16" and record["reference"]["precision"] == "fp32"
    tested, ref = record["runs"]["recipe"]["steps"], record["runs"]["reference"]["steps"]
    assert all(math.isfinite(s["loss"]) for s in ref)  # the reference is finite at every step ...
    first_bad = next(i for i, s in enumerate(tested) if not isinstance(s["loss"], float) or not math.isfinite(s["loss"]))
    assert record["worst"]["step"] == first_bad + 1 and tested[first_bad]["loss"] in ("nan", "inf", "-inf")
    for a, b in zip(tested[:first_bad], ref[:first_bad]):  # ... and the finite steps before the overflow agree
        assert abs(a["loss"] - b["loss"]) / b["loss"] < 2e-3
    # The bisection: on CPU only the precision differs from the reference, so that change is named.
    assert record["restored_by"] == {"change": "precision", "set": "precision=fp32"}
    assert 'precision restores agreement: SET="precision=fp32"' in proc.stdout
    tested_args, ref_args = (yaml.safe_load((_run_dir(record["runs"][k]["run"]) / "train.yaml").read_text())
                             for k in ("recipe", "reference"))
    assert (tested_args["fp16"], tested_args["use_cpu"], tested_args["model_name_or_path"]) == (True, True, "models/tiny-llama-fp16")
    assert (ref_args["fp16"], ref_args["model_name_or_path"]) == (False, "models/tiny-llama-fp16-fp32")
    assert tested_args["seed"] == ref_args["seed"] and tested_args["dataset"] == ref_args["dataset"]


def _run_dir(run: str) -> Path:
    from tests.conftest import ROOT

    return Path(run) if Path(run).is_absolute() else ROOT / run
