"""`rocmft bench tiny-cpu` for real on CPU (`pytest -m train`): one row, checked field by field, then the
report shows it with the planner's prediction; and the token count checked against the dataset itself."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT, offline_env, rocmft

pytestmark = pytest.mark.train

STEPS = 4


@pytest.fixture(scope="module")
def benched(tmp_path_factory, tiny_model):
    tmp = tmp_path_factory.mktemp("bench")
    env = offline_env(tmp, MPLCONFIGDIR=str(tmp / "mpl"))
    results = tmp / "bench.csv"
    proc = rocmft("bench", "tiny-cpu", "--steps", str(STEPS), "--results", str(results), "--quiet", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, env, results, proc


def test_one_valid_row_field_by_field(benched):
    from rocmft import bench

    _, _, results, proc = benched
    rows = bench.read_rows(results)
    assert len(rows) == 1
    row = rows[0][1]
    assert bench.validate_row(row) == []
    assert list(row) == list(bench.COLUMNS)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["date"])
    assert row["host"] == socket.gethostname()
    assert (row["arch"], row["gpu_model"], row["gpu_count"]) == ("cpu", "cpu", "1")
    assert (row["recipe"], row["model"], row["method"], row["zero_stage"]) == ("tiny-cpu", "models/tiny-llama", "lora", "none")
    assert (row["cutoff_len"], row["micro_batch"], row["grad_accum"]) == ("128", "4", "1")
    tps = float(row["tokens_per_s_per_gpu"])
    assert 0 < tps < 1e7
    assert row["mfu"] == ""  # the cpu arch has no peak ...
    assert "MFU left empty: docker/arches.yaml has no fp32 peak for arch `cpu`" in proc.stdout  # ... and it is said
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
    assert (row["precision"], row["steps"]) == ("fp32", str(STEPS))
    assert shlex.split(row["overrides"]) == ["arch=cpu", "gpus_per_node=1", "nodes=1"]


def test_row_agrees_with_metrics_json(benched):
    from rocmft import bench

    tmp, _, results, _ = benched
    run_dirs = [p for p in (tmp / "runs").iterdir() if p.name.startswith("tiny-cpu-bench-")]
    assert len(run_dirs) == 1 and (run_dirs[0] / "output" / "metrics.json").is_file()
    run_dir = run_dirs[0]
    metrics = json.loads((run_dir / "output" / "metrics.json").read_text())
    row = bench.read_rows(results)[0][1]
    assert metrics["global_step"] == STEPS and len(metrics["steps"]) == STEPS
    assert metrics["warmup_steps"] == 2 and metrics["measured_steps"] == STEPS - 2
    packed = bool(yaml.safe_load((run_dir / "train.yaml").read_text()).get("neat_packing"))
    assert metrics["tokens_mode"] == ("all" if packed else "non_padding")  # a packed run's mask is no count
    # positive, and at most what the micro-batches held; packed, every position counts (the one-epoch test below
    # checks the non-padding count of an unpacked run against the dataset's attention masks)
    assert 0 < metrics["tokens_seen"] <= STEPS * 4 * 128
    assert metrics["measured_tokens"] == metrics["steps"][-1]["tokens_seen"] - metrics["steps"][1]["tokens_seen"]
    assert float(row["tokens_per_s_per_gpu"]) == pytest.approx(metrics["measured_tokens"] / metrics["measured_time_s"], rel=1e-4)
    assert float(row["peak_mem_gib"]) == pytest.approx(metrics["peak_memory"]["rss_gib"], rel=1e-4)
    # saving off: no checkpoint-N, no loss plot; the run itself succeeded
    assert not list((run_dir / "output").glob("checkpoint-*"))
    assert not (run_dir / "output" / "training_loss.png").exists()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "succeeded"


def test_report_shows_the_row_with_the_planners_prediction(benched):
    from rocmft import bench, plan
    from rocmft.recipe import recipes

    tmp, env, results, _ = benched
    png = tmp / "bench.png"
    proc = rocmft("bench-report", "--results", str(results), "--plot", str(png), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    row_line = next(line for line in lines if line.startswith("1 ") and "tiny-cpu" in line)
    measured = float(bench.read_rows(results)[0][1]["tokens_per_s_per_gpu"])
    assert f"{measured:,.0f}" in row_line or f"{measured:.3g}" in row_line
    predicted = plan.check(recipes.load("tiny-cpu", ["arch=cpu", "gpus_per_node=1", "nodes=1"]), steps=STEPS).memory.total_gib
    assert f"{predicted:.3g}" in row_line  # the planner's memory beside the measured RSS
    assert "rss" in row_line and "n/c" in row_line
    assert "no known fp32 peak for cpu" in proc.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_tokens_over_one_epoch_equal_the_datasets_attention_mask(tmp_path, tiny_model):
    """The callback's count (the Trainer's non-padding count) against a manual one: over exactly one epoch every
    sample is seen once whatever the shuffle, so the count must equal the sum of the tokenized dataset's
    attention masks. Unpacked (`neat_packing=false`): micro-batches are padded to their longest row, so a count
    that took padding in would be larger. (Packed, the bench counts every position, padding included: about 8%
    of tiny-cpu's packed positions are padding, as `benchmarks/packing.py` measures through LLaMA-Factory's own
    preprocessing and collator.)"""
    env = offline_env(tmp_path, MPLCONFIGDIR=str(tmp_path / "mpl"))
    unpacked = "neat_packing=false"
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
    render = rocmft("render", "tiny-cpu", "--run-name", "count", unpacked, env=env)
    assert render.returncode == 0, render.stdout + render.stderr
    assert yaml.safe_load((tmp_path / "runs" / "count" / "train.yaml").read_text()).get("neat_packing") is False
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "runs" / "count" / "train.yaml"),
                           str(tmp_path / "scratch")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    steps = -(-data["rows"] // 4)  # one epoch at micro-batch 4 (the last batch is short)
    assert data["tokens"] < data["rows"] * data["longest"]  # rows of different lengths: batches carry padding
    results = tmp_path / "bench.csv"
    bench_proc = rocmft("bench", "tiny-cpu", "--steps", str(steps), "--results", str(results), "--quiet", unpacked,
                        env=env)
    assert bench_proc.returncode == 0, bench_proc.stdout[-3000:] + bench_proc.stderr[-3000:]
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "output" / "metrics.json").is_file())
    metrics = json.loads((run_dir / "output" / "metrics.json").read_text())
    assert metrics["global_step"] == steps and metrics["tokens_mode"] == "non_padding"
    assert metrics["tokens_seen"] == data["tokens"]


def test_record_appends_a_finished_runs_row_once(benched):
    """`--record` (for runtimes that return before the job ends) rebuilds the same row from the run dir alone."""
    import shutil

    from rocmft import bench

    tmp, env, results, _ = benched
    run_dir = next(p for p in (tmp / "runs").iterdir() if p.name.startswith("tiny-cpu-bench-"))
    again = rocmft("bench", str(run_dir), "--record", "--results", str(tmp / "again.csv"), env=env)
    assert again.returncode == 2 and "already recorded" in again.stderr
    copy = tmp / "runs" / "copied-bench"
    shutil.copytree(run_dir, copy)
    record = json.loads((copy / bench.BENCH_FILE).read_text())
    record["recorded_in"] = None
    (copy / bench.BENCH_FILE).write_text(json.dumps(record))
    other = tmp / "recorded.csv"
    proc = rocmft("bench", str(copy), "--record", "--results", str(other), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = bench.read_rows(results)[0][1], bench.read_rows(other)[0][1]
    assert {k: v for k, v in first.items() if k != "date"} == {k: v for k, v in second.items() if k != "date"}
