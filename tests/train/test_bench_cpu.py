"""`rocmft bench tiny-cpu` for real on CPU (`pytest -m train`): the two bench runs of the session's gpu_truth dry run
(tests/conftest.py `gpu_truth_dry`: tiny-cpu neat-packed, and with padded rows for exactly one epoch, each an
ordinary `rocmft bench` with gpu_truth's overrides) read here: a row checked field by field, the report showing it
with the planner's prediction, `--record` rebuilding it, and the token count checked against the dataset itself."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT, GpuTruthDry, offline_env, rocmft

pytestmark = pytest.mark.train


def _row(gpu_truth_dry: GpuTruthDry, config: str) -> dict:
    """The bench.csv row of gpu_truth's `config` run (the padded one names neat_packing=false)."""
    from rocmft import bench

    rows = [row for _, row in bench.read_rows(gpu_truth_dry.work / "bench.csv")]
    assert len(rows) == 2, rows
    padded = [row for row in rows if "neat_packing=false" in shlex.split(row["overrides"])]
    return padded[0] if config == "lora-padded" else next(row for row in rows if row not in padded)


@pytest.fixture(scope="module")
def benched(gpu_truth_dry: GpuTruthDry):
    """(the neat-packed run dir, its row, the results file, the step count)."""
    return gpu_truth_dry.run_dir("lora-neat"), _row(gpu_truth_dry, "lora-neat"), gpu_truth_dry.work / "bench.csv", \
        gpu_truth_dry.steps


def test_one_valid_row_field_by_field(benched, gpu_truth_dry: GpuTruthDry):
    from rocmft import bench

    run_dir, row, _, steps = benched
    assert bench.validate_row(row) == []
    assert list(row) == list(bench.COLUMNS)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["date"])
    assert row["host"] == socket.gethostname()
    assert (row["arch"], row["gpu_model"], row["gpu_count"]) == ("cpu", "cpu", "1")
    model = str(gpu_truth_dry.work / "model-tiny-random")  # gpu_truth's random model of the tiny model's shape
    assert (row["recipe"], row["model"], row["method"], row["zero_stage"]) == ("tiny-cpu", model, "lora", "none")
    assert (row["cutoff_len"], row["micro_batch"], row["grad_accum"]) == ("128", "4", "1")
    tps = float(row["tokens_per_s_per_gpu"])
    assert 0 < tps < 1e7
    assert row["mfu"] == ""  # the cpu arch has no peak (test_record_... reads the note that says so)
    mem = float(row["peak_mem_gib"])
    assert 0.05 < mem < 64  # peak RSS of one training process, in GiB
    p50, p90 = float(row["step_time_p50_s"]), float(row["step_time_p90_s"])
    assert 0 < p50 <= p90 < 60
    assert row["rocm"] == "none"
    from importlib import metadata

    assert row["torch"] == metadata.version("torch")
    assert row["llamafactory"] == metadata.version("llamafactory")
    assert row["deepspeed"] == metadata.version("deepspeed")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    assert row["commit"].split("+")[0] == head
    assert (row["precision"], row["steps"]) == ("fp32", str(steps))
    # what ran: gpu_truth's overrides, then where the bench ran them (arch, one process)
    recorded = json.loads((run_dir / bench.BENCH_FILE).read_text())["overrides"]
    assert shlex.split(row["overrides"]) == recorded
    assert recorded[-3:] == ["arch=cpu", "gpus_per_node=1", "nodes=1"]
    assert {f"model_name_or_path={model}", "cutoff_len=128", "val_size=0"} <= set(recorded)


def test_row_agrees_with_metrics_json(benched):
    run_dir, row, _, steps = benched
    metrics = json.loads((run_dir / "output" / "metrics.json").read_text())
    assert metrics["global_step"] == steps and len(metrics["steps"]) == steps
    assert metrics["warmup_steps"] == 2 and metrics["measured_steps"] == steps - 2
    packed = bool(yaml.safe_load((run_dir / "train.yaml").read_text()).get("neat_packing"))
    assert packed and metrics["tokens_mode"] == "all"  # a packed run's mask is no count
    # positive, and at most what the micro-batches held; packed, every position counts (the one-epoch test below
    # checks the non-padding count of an unpacked run against the dataset's attention masks)
    assert 0 < metrics["tokens_seen"] <= steps * 4 * 128
    assert metrics["measured_tokens"] == metrics["steps"][-1]["tokens_seen"] - metrics["steps"][1]["tokens_seen"]
    assert float(row["tokens_per_s_per_gpu"]) == pytest.approx(metrics["measured_tokens"] / metrics["measured_time_s"], rel=1e-4)
    assert float(row["peak_mem_gib"]) == pytest.approx(metrics["peak_memory"]["rss_gib"], rel=1e-4)
    # saving off: no checkpoint-N, no loss plot; the run itself succeeded
    assert not list((run_dir / "output").glob("checkpoint-*"))
    assert not (run_dir / "output" / "training_loss.png").exists()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "succeeded"


def test_report_shows_the_row_with_the_planners_prediction(benched, gpu_truth_dry: GpuTruthDry, tmp_path):
    from rocmft import plan
    from rocmft.recipe import recipes

    _, row, results, steps = benched
    png = tmp_path / "bench.png"
    proc = rocmft("bench-report", "--results", str(results), "--plot", str(png), env=gpu_truth_dry.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    measured = float(row["tokens_per_s_per_gpu"])
    row_line = next(line for line in proc.stdout.splitlines()
                    if re.match(r"\d+ ", line) and "tiny-cpu" in line and (f"{measured:,.0f}" in line or f"{measured:.3g}" in line))
    predicted = plan.check(recipes.load("tiny-cpu", shlex.split(row["overrides"])), steps=steps).memory.total_gib
    assert f"{predicted:.3g}" in row_line  # the planner's memory beside the measured RSS
    assert "rss" in row_line and "n/c" in row_line
    assert "no known fp32 peak for cpu" in proc.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_tokens_over_one_epoch_equal_the_datasets_attention_mask(gpu_truth_dry: GpuTruthDry, tmp_path):
    """The callback's count (the Trainer's non-padding count) against a manual one: gpu_truth's padded run trained
    exactly one epoch, and over one epoch every sample is seen once whatever the shuffle, so the count must equal
    the sum of the tokenized dataset's attention masks (LLaMA-Factory's own processing of the run's train.yaml).
    Unpacked (`neat_packing=false`): micro-batches are padded to their longest row, so a count that took padding
    in would be larger. (Packed, the bench counts every position, padding included: about 8% of tiny-cpu's packed
    positions are padding, as `benchmarks/packing.py` measures through LLaMA-Factory's own preprocessing and
    collator.)"""
    run_dir = gpu_truth_dry.run_dir("lora-padded")
    args = yaml.safe_load((run_dir / "train.yaml").read_text())
    assert args.get("neat_packing") is False and args["per_device_train_batch_size"] == 4
    script = (
        "import sys, json\n"
        "from omegaconf import OmegaConf\n"
        "from llamafactory.hparams import get_train_args\n"
        "from llamafactory.data import get_dataset, get_template_and_fix_tokenizer\n"
        "from llamafactory.model import load_tokenizer\n"
        "args = OmegaConf.to_container(OmegaConf.load(sys.argv[1]))\n"
        "args['output_dir'] = sys.argv[2]\n"
        "m, d, t, f, _ = get_train_args(args)\n"
        "tok = load_tokenizer(m)\n"
        "tpl = get_template_and_fix_tokenizer(tok['tokenizer'], d)\n"
        "ds = get_dataset(tpl, m, d, t, stage='sft', **tok)['train_dataset']\n"
        "print(json.dumps({'rows': len(ds), 'tokens': sum(sum(x) for x in ds['attention_mask']),\n"
        "                  'longest': max(len(x) for x in ds['input_ids'])}))\n"
    )
    env = offline_env(tmp_path, MPLCONFIGDIR=str(tmp_path / "mpl"))
    proc = subprocess.run([sys.executable, "-c", script, str(run_dir / "train.yaml"), str(tmp_path / "scratch")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["rows"] == gpu_truth_dry.rows  # every row kept: the fixture's step count is one epoch
    assert gpu_truth_dry.steps == -(-data["rows"] // 4)  # one epoch at micro-batch 4 (the last batch is short)
    assert data["tokens"] < data["rows"] * data["longest"]  # rows of different lengths: batches carry padding
    metrics = json.loads((run_dir / "output" / "metrics.json").read_text())
    assert metrics["global_step"] == gpu_truth_dry.steps and metrics["tokens_mode"] == "non_padding"
    assert metrics["tokens_seen"] == data["tokens"]


def test_record_appends_a_finished_runs_row_once(benched, gpu_truth_dry: GpuTruthDry, tmp_path):
    """`--record` (for runtimes that return before the job ends) rebuilds the same row from the run dir alone, and
    says why the MFU is empty."""
    from rocmft import bench

    run_dir, first, _, _ = benched
    env = offline_env(tmp_path)
    again = rocmft("bench", str(run_dir), "--record", "--results", str(tmp_path / "again.csv"), env=env)
    assert again.returncode == 2 and "already recorded" in again.stderr
    copy = tmp_path / "runs" / "copied-bench"
    shutil.copytree(run_dir, copy)
    record = json.loads((copy / bench.BENCH_FILE).read_text())
    record["recorded_in"] = None
    (copy / bench.BENCH_FILE).write_text(json.dumps(record))
    other = tmp_path / "recorded.csv"
    proc = rocmft("bench", str(copy), "--record", "--results", str(other), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MFU left empty: docker/arches.yaml has no fp32 peak for arch `cpu`" in proc.stdout
    second = bench.read_rows(other)[0][1]
    assert {k: v for k, v in first.items() if k != "date"} == {k: v for k, v in second.items() if k != "date"}
