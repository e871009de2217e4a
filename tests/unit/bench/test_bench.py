"""`make bench` / `make bench-report` without training: the CSV file, row checks, MFU, the planner beside a row,
bad input (STEPS <= 0 exits 2 before anything is written), and the metrics callback fed fake Trainer events."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocmft import bench, pipeline
from rocmft.cli import main as cli
from rocmft.io.problems import EXIT_INVALID, ProblemReport
from rocmft.recipe import recipes

GOOD = {
    "date": "2026-12-02T13:18:39Z", "host": "node7", "arch": "gfx942", "gpu_model": "AMD Instinct MI300X",
    "gpu_count": "8", "recipe": "llama3-8b-z3", "model": "meta-llama/Meta-Llama-3-8B-Instruct", "method": "lora",
    "zero_stage": "3", "cutoff_len": "2048", "micro_batch": "4", "grad_accum": "4",
    "tokens_per_s_per_gpu": "3100.5", "mfu": "0.31", "peak_mem_gib": "61.2", "step_time_p50_s": "10.5",
    "step_time_p90_s": "10.9", "rocm": "7.0.51831", "torch": "2.8.0+rocm7.0.2", "llamafactory": "0.9.5",
    "deepspeed": "0.19.8", "commit": "c1663ac8ef5c2c20bf658688e6ef3cb06bbbedc6", "precision": "bf16", "steps": "20",
    "overrides": "arch=gfx942 gpus_per_node=8 nodes=1",
}


def cpu_row(**changes) -> dict[str, str]:
    row = {**GOOD, "arch": "cpu", "gpu_model": "cpu", "gpu_count": "1", "recipe": "tiny-cpu", "model": "models/tiny-llama",
           "zero_stage": "none", "cutoff_len": "128", "micro_batch": "4", "grad_accum": "1", "mfu": "", "rocm": "none",
           "torch": "2.13.0+cpu", "precision": "fp32", "peak_mem_gib": "0.58", "overrides": "arch=cpu gpus_per_node=1 nodes=1"}
    row.update(changes)
    return row


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("value", ["0", "-1", "-20", "abc", "1.5", "", " "])
def test_steps_must_be_a_positive_whole_number(value):
    with pytest.raises(ProblemReport) as exc:
        bench.check_steps(value)
    assert exc.value.problems[0].key == "STEPS"


def test_steps_accepted():
    assert bench.check_steps("4") == 4
    assert bench.check_steps(20) == 20


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_cli_steps_not_positive_exits_2_and_writes_nothing(steps, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    results = tmp_path / "bench.csv"
    code = cli.main(["bench", "tiny-cpu", "--steps", steps, "--results", str(results)])
    assert code == EXIT_INVALID
    assert "STEPS: must be a whole number of optimizer steps >= 1" in capsys.readouterr().err
    assert not results.exists()
    assert not (tmp_path / "runs").exists()


def test_cli_refuses_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    assert cli.main(["bench", "tiny-cpu", "--resume", "last", "--results", str(tmp_path / "b.csv")]) == EXIT_INVALID
    assert "RESUME" in capsys.readouterr().err


def test_cli_refuses_a_results_file_with_other_columns_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    results = tmp_path / "other.csv"
    results.write_text("a,b\n1,2\n")
    assert cli.main(["bench", "tiny-cpu", "--steps", "2", "--results", str(results)]) == EXIT_INVALID
    assert "header is not rocmft's bench columns" in capsys.readouterr().err
    assert results.read_text() == "a,b\n1,2\n"
    assert not (tmp_path / "runs").exists()


def test_record_needs_a_bench_run_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    assert cli.main(["bench", str(tmp_path / "nope"), "--record", "--results", str(tmp_path / "b.csv")]) == EXIT_INVALID
    assert "not a run directory" in capsys.readouterr().err
    run_dir = tmp_path / "runs" / "plain-train-run"
    run_dir.mkdir(parents=True)
    (run_dir / "train.yaml").write_text("stage: sft\n")
    assert cli.main(["bench", str(run_dir), "--record", "--results", str(tmp_path / "b.csv")]) == EXIT_INVALID
    assert "not a bench run" in capsys.readouterr().err
    assert not (tmp_path / "b.csv").exists()


# ---------------------------------------------------------------- overrides and paths

def test_bench_overrides_are_typed_as_meant():
    items = bench.bench_overrides(["lora_rank=4"], 7, {})
    parsed = {".".join(path): value for path, value in recipes.parse_overrides(items, recipes.PROJECT_KEYS)}
    assert parsed["llamafactory.lora_rank"] == 4
    assert parsed["llamafactory.max_steps"] == 7
    assert parsed["llamafactory.save_strategy"] == "no"  # the string, not YAML's false
    assert parsed["llamafactory.eval_strategy"] == "no"
    assert parsed["llamafactory.logging_steps"] == 1
    assert parsed["llamafactory.plot_loss"] is False
    assert parsed["env.ROCMFT_METRICS"] == 1
    assert "env.ROCMFT_METRICS_TOKENS" not in parsed
    neat = bench.bench_overrides([], 3, {"neat_packing": True})
    assert "env.ROCMFT_METRICS_TOKENS=all" in neat


def test_bench_overrides_win_over_the_users():
    recipe = recipes.load("tiny-cpu", bench.bench_overrides(["max_steps=999", "save_strategy=steps"], 5, {}))
    assert recipe.llamafactory["max_steps"] == 5
    assert recipe.llamafactory["save_strategy"] == "no"
    assert recipe.env["ROCMFT_METRICS"] == "1"


def test_results_path_order(tmp_path):
    assert bench.results_path(tmp_path / "a.csv", env={bench.RESULTS_ENV: str(tmp_path / "b.csv")}) == tmp_path / "a.csv"
    assert bench.results_path(None, env={bench.RESULTS_ENV: str(tmp_path / "b.csv")}) == tmp_path / "b.csv"
    assert bench.results_path(None, env={}).parts[-2:] == ("results", "bench.csv")


def test_warmup_constant_matches_the_callback():
    from rocmft.callbacks import metrics

    assert bench.WARMUP_STEPS == metrics.WARMUP_STEPS


def test_row_facts():
    assert bench.zero_stage("none") == "none"
    assert bench.zero_stage("zero3-offload") == "3-offload"
    assert bench.zero_stage("zero2") == "2"
    assert bench.method({"finetuning_type": "lora", "quantization_bit": 4}) == "lora+4bit"
    assert bench.method({"finetuning_type": "full"}) == "full"
    assert bench.method({}) == "lora"


# ---------------------------------------------------------------- MFU

def test_mfu_math():
    # 1,000 tokens/s x 1e9 FLOPs/token = 1e12 FLOP/s on a 100 TFLOP/s peak: 1%
    assert bench.compute_mfu(1000.0, 1e9, 100.0) == pytest.approx(0.01)
    assert bench.compute_mfu(3000.0, 6 * 8e9, 1307.4) == pytest.approx(3000 * 48e9 / 1307.4e12)
    assert bench.compute_mfu(1000.0, 1e9, None) is None
    assert bench.compute_mfu(None, 1e9, 100.0) is None
    assert bench.compute_mfu(1000.0, None, 100.0) is None


def _prep(spec: str, overrides=(), tmp: Path | None = None):
    return pipeline.prepare(spec, list(overrides), validate=False)


def test_build_row_gpu_mfu_uses_the_planners_flops_per_token(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    from rocmft import plan

    prep = _prep("llama3-8b-lora")
    result = plan.check(prep.recipe, steps=20)
    metrics = {"host": "node7", "world_size": prep.recipe.world_size, "device": "AMD Instinct MI300X",
               "versions": {"torch": "2.8.0+rocm7.0.2", "llamafactory": "0.9.5", "deepspeed": "0.19.8",
                            "rocm": "7.0.51831"},
               "micro_batch": 2, "grad_accum": 8, "tokens_per_s_per_gpu": 2500.0, "step_time_p50_s": 3.0,
               "step_time_p90_s": 3.2, "peak_memory": {"kind": "gpu", "allocated_gib": 40.0, "reserved_gib": 44.5,
                                                        "rss_gib": 9.0}}
    built = bench.build_row(prep, metrics, result, steps=20, stored_overrides=["arch=gfx942"],
                            commit_id="a" * 40, now=datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc))
    row = built.row
    assert list(row) == list(bench.COLUMNS)
    expected = 2500.0 * result.throughput.flops_per_token / (prep.arch.peak("bf16") * 1e12)
    assert float(row["mfu"]) == pytest.approx(expected, rel=1e-3)
    assert row["peak_mem_gib"] == "44.5"  # max_memory_reserved, not allocated
    assert row["gpu_model"] == "AMD Instinct MI300X"
    assert row["rocm"] == "7.0.51831" and row["torch"] == "2.8.0+rocm7.0.2"
    assert row["date"] == "2026-12-02T12:00:00Z"
    assert row["micro_batch"] == "2" and row["grad_accum"] == "8"
    assert built.notes == []
    assert bench.validate_row(row) == []


def test_build_row_cpu_leaves_mfu_empty_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    from rocmft import plan

    prep = _prep("tiny-cpu")
    metrics = {"world_size": 1, "device": "cpu", "micro_batch": 4, "grad_accum": 1, "tokens_per_s_per_gpu": 4000.0,
               "step_time_p50_s": 0.04, "step_time_p90_s": 0.05, "peak_memory": {"kind": "rss", "rss_gib": 0.6},
               "versions": {"torch": "2.13.0+cpu", "llamafactory": "0.9.5"}}
    built = bench.build_row(prep, metrics, plan.check(prep.recipe, steps=4), steps=4, stored_overrides=[],
                            host_versions={}, commit_id="b" * 40)
    assert built.row["mfu"] == ""
    assert any("no fp32 peak for arch `cpu`" in n for n in built.notes)
    assert built.row["gpu_model"] == "cpu" and built.row["rocm"] == "none" and built.row["deepspeed"] == "none"
    assert built.row["peak_mem_gib"] == "0.6"
    assert bench.validate_row(built.row) == []


def test_gpu_model_falls_back_to_the_arch_product(monkeypatch):
    from rocmft.hardware import arches

    monkeypatch.setattr(bench.facts, "_smi_product", lambda: None)
    assert bench.gpu_model(arches.get("gfx942"), {"device": ""}) == "MI300X"
    monkeypatch.setattr(bench.facts, "_smi_product", lambda: "AMD Instinct MI325X")
    assert bench.gpu_model(arches.get("gfx942"), {}) == "AMD Instinct MI325X"
    assert bench.gpu_model(arches.get("cpu"), {"device": "whatever"}) == "cpu"


# ---------------------------------------------------------------- row validation

def test_good_rows_are_valid():
    assert bench.validate_row(GOOD) == []
    assert bench.validate_row(cpu_row()) == []


@pytest.mark.parametrize("changes, fragment", [
    ({"date": "yesterday"}, "date"),
    ({"host": ""}, "host: empty"),
    ({"arch": "gfx9999"}, "unknown arch"),
    ({"gpu_count": "0"}, "gpu_count"),
    ({"gpu_count": "two"}, "gpu_count"),
    ({"method": "dpo"}, "method"),
    ({"zero_stage": "4"}, "zero_stage"),
    ({"cutoff_len": "0"}, "cutoff_len"),
    ({"micro_batch": "1.5"}, "micro_batch"),
    ({"tokens_per_s_per_gpu": "0"}, "tokens_per_s_per_gpu"),
    ({"tokens_per_s_per_gpu": "nan"}, "tokens_per_s_per_gpu"),
    ({"mfu": "1.7"}, "mfu"),
    ({"peak_mem_gib": ""}, "peak_mem_gib: empty"),
    ({"step_time_p90_s": "9.0"}, "below step_time_p50_s"),
    ({"rocm": "none"}, "ROCm version"),
    ({"torch": ""}, "torch: empty"),
    ({"commit": "main"}, "commit"),
    ({"precision": "int8"}, "precision"),
    ({"overrides": "a='b"}, "overrides"),
])
def test_bad_rows_name_the_field(changes, fragment):
    problems = bench.validate_row({**GOOD, **changes})
    assert problems and any(fragment in p for p in problems), problems


def test_missing_columns():
    row = dict(GOOD)
    del row["mfu"]
    assert bench.validate_row(row) == ["missing columns: mfu"]


# ---------------------------------------------------------------- the CSV file

def test_append_creates_with_header_and_never_rewrites(tmp_path):
    path = tmp_path / "sub" / "bench.csv"
    bench.append_row(path, GOOD)
    first = path.read_bytes()
    assert first.startswith(bench.HEADER_LINE.encode())
    bench.append_row(path, cpu_row(overrides='lora_target="q_proj,v_proj" arch=cpu'))
    assert path.read_bytes().startswith(first)  # the first row is byte for byte what it was
    rows = bench.read_rows(path)
    assert [r["recipe"] for _, r in rows] == ["llama3-8b-z3", "tiny-cpu"]
    assert rows[1][1]["overrides"] == 'lora_target="q_proj,v_proj" arch=cpu'  # commas and quotes survive
    assert shlex.split(rows[1][1]["overrides"]) == ["lora_target=q_proj,v_proj", "arch=cpu"]
    assert rows[0][0] == 2 and rows[1][0] == 3  # line numbers for the report's warnings


def test_append_after_a_hand_edit_without_final_newline(tmp_path):
    path = tmp_path / "bench.csv"
    bench.append_row(path, GOOD)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    bench.append_row(path, cpu_row())
    assert len(bench.read_rows(path)) == 2


def test_append_refuses_other_columns(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("date,host\nx,y\n")
    with pytest.raises(ProblemReport):
        bench.append_row(path, GOOD)
    assert path.read_text() == "date,host\nx,y\n"


APPEND_MANY = """
import json, sys
from pathlib import Path
from rocmft import bench
path, n, tag, row = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
for i in range(n):
    bench.append_row(Path(path), {**row, "host": f"{tag}-{i}"})
"""


def test_concurrent_appends_keep_every_row_whole(tmp_path):
    path = tmp_path / "bench.csv"
    # Four separate interpreters, not a fork Pool: by now this pytest process may hold pyarrow (jemalloc's
    # background thread, from an earlier test's LLaMA-Factory import), and a forked worker then deadlocked in
    # malloc at its exit; a spawn Pool leaves multiprocessing's resource tracker running after the test.
    writers = [subprocess.Popen([sys.executable, "-c", APPEND_MANY, str(path), "25", f"p{k}", json.dumps(GOOD)])
               for k in range(4)]
    assert [w.wait(timeout=300) for w in writers] == [0, 0, 0, 0]
    text = path.read_text()
    assert text.count(bench.HEADER_LINE) == 1
    rows = bench.read_rows(path)
    assert len(rows) == 100
    assert all(bench.validate_row(r) == [] for _, r in rows)
    assert len({r["host"] for _, r in rows}) == 100


def test_read_rows_missing_file_is_empty(tmp_path):
    assert bench.read_rows(tmp_path / "none.csv") == []


def test_the_results_file_in_the_repo_has_the_columns_and_valid_rows():
    shipped = Path(__file__).resolve().parents[3] / "results" / "bench.csv"
    assert shipped.is_file(), "results/bench.csv is shipped (its header at least): `make bench` appends to it"
    with open(shipped, newline="") as fh:
        assert next(csv.reader(fh)) == list(bench.COLUMNS)
    assert all(bench.validate_row(row) == [] for _, row in bench.read_rows(shipped))


# ---------------------------------------------------------------- the planner beside a row

def test_prediction_for_a_gpu_row_and_error_sign():
    pred = bench.predict(GOOD)
    assert pred.tokens_per_s is not None and pred.tokens_per_s[0] < pred.tokens_per_s[1]
    assert pred.memory_gib is not None and 0 < pred.memory_gib < pred.plan_total_gib
    assert pred.mfu is not None
    assert bench.error_pct(100.0, 110.0) == pytest.approx(10.0)  # planner above the measurement: +
    assert bench.error_pct(100.0, 90.0) == pytest.approx(-10.0)
    assert bench.error_pct(None, 90.0) is None and bench.error_pct(100.0, None) is None


def test_predicted_mfu_counts_model_flops_like_the_measured_column():
    # llama3-8b-z3 on 8 GPUs: LoRA (unfused adapters) and ZeRO-3 gathers per micro-batch lower the MFU the row
    # should show; the measured column divides by model FLOPs (no recompute), so the prediction does too.
    import math

    from rocmft import plan
    from rocmft.plan import throughput

    result = plan.check(recipes.load("llama3-8b-z3", shlex.split(GOOD["overrides"])), steps=20)
    tp = result.throughput
    factors = dict(tp.factors)  # the GPU's speed factors; the host's time (ZeRO-3's hooks) per end in tp.host
    assert "PEFT LoRA adapters, unfused" in factors and any(k.startswith("ZeRO-3") for k in factors)
    assert any(k.startswith("ZeRO-3 hooks") for k, _ in tp.host)
    assert set(throughput.speed_factors(result.workload)) == set(tp.factors)
    pred = bench.predict(GOOD)
    lo, hi = result.workload.mfu
    host = [math.prod(ends[e] for _, ends in tp.host) for e in (1, 0)]  # (slow end, fast end)
    assert pred.mfu == pytest.approx((lo * tp.factor * host[0], hi * tp.factor * host[1]))
    flops = throughput.flops_per_token(result.workload)[0]
    assert pred.mfu == pytest.approx(tuple(t * flops / (tp.peak_tflops * 1e12) for t in tp.tokens_per_s_gpu))
    line = bench.compare([(2, GOOD)])[0]
    assert line.tps_err is not None and line.mem_err is not None  # an error per row


def test_prediction_for_an_unknown_recipe_says_so():
    pred = bench.predict({**GOOD, "recipe": "someone-elses-recipe"})
    assert pred.memory_gib is None and pred.tokens_per_s is None
    assert any("unknown recipe" in n for n in pred.notes)


def test_prediction_flags_a_recipe_that_changed_since_the_row():
    pred = bench.predict({**GOOD, "cutoff_len": "4096"})
    assert any("changed since this row" in n and "cutoff_len 4096 -> 8192" in n for n in pred.notes)


def test_report_table_shows_measured_and_predicted():
    lines = bench.compare([(2, GOOD), (3, cpu_row())])
    table = bench.render_table(lines)
    gpu, cpu = table.splitlines()[2:4]
    assert "llama3-8b-z3" in gpu and "3,100" in gpu and "%" in gpu
    low = lines[0].pred.tokens_per_s[0]
    assert f"{low:,.0f}" in gpu
    assert "tiny-cpu" in cpu and "0.58 rss" in cpu and "n/c" in cpu
    notes = "\n".join(bench.render_notes(lines))
    assert "#2: MFU empty" in notes and "HIP context" in notes


def test_report_cli_prints_rows_and_writes_a_png(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    path = tmp_path / "bench.csv"
    bench.append_row(path, GOOD)
    bench.append_row(path, cpu_row())
    with open(path, "a") as fh:
        fh.write(",".join(["bad"] * len(bench.COLUMNS)) + "\n")
    plot = tmp_path / "out.png"
    assert cli.main(["bench-report", "--results", str(path), "--plot", str(plot)]) == 0
    out = capsys.readouterr()
    assert "2 row(s)" in out.out and "llama3-8b-z3" in out.out and "tiny-cpu" in out.out
    assert "line 4: row left out" in out.err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_cli_without_rows(tmp_path, capsys):
    assert cli.main(["bench-report", "--results", str(tmp_path / "none.csv")]) == 0
    assert "no bench rows" in capsys.readouterr().out


# ---------------------------------------------------------------- the metrics callback (fake Trainer events)

def test_percentile_and_warmup():
    from rocmft.callbacks.metrics import percentile, warmup_for

    assert percentile([3, 1, 2], 50) == 2
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)  # numpy's linear method
    assert percentile([], 50) is None
    assert warmup_for(20) == 2 and warmup_for(2) == 1 and warmup_for(1) == 0


def test_summarize_leaves_warmup_out():
    from rocmft.callbacks.metrics import summarize

    steps = [{"period_s": p, "compute_s": p * 0.9, "tokens_seen": t}
             for p, t in ((5.0, 100), (2.0, 200), (1.0, 300), (1.0, 400), (2.0, 500))]
    out = summarize(steps, 2, world_size=2)
    assert out["measured_steps"] == 3 and out["warmup_steps"] == 2
    assert out["measured_tokens"] == 300  # 500 - 200: tokens after the warmup steps
    assert out["tokens_per_s"] == pytest.approx(300 / 4.0)
    assert out["tokens_per_s_per_gpu"] == pytest.approx(300 / 4.0 / 2)
    assert out["step_time_p50_s"] == 1.0 and out["step_time_p90_s"] == pytest.approx(1.8)
    resumed = summarize(steps[:1], 0, 1, tokens_at_begin=40)
    assert resumed["measured_tokens"] == 60


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _drive(cb, clock, steps, tokens_per_step, world=1, mode=None):
    args = SimpleNamespace(world_size=world, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                           include_num_input_tokens_seen="no")
    state = SimpleNamespace(global_step=0, max_steps=steps, num_input_tokens_seen=0, is_world_process_zero=True)
    cb.on_train_begin(args, state, None)
    assert args.include_num_input_tokens_seen == (mode or "non_padding")
    for i in range(steps):
        clock.t += 0.5  # fetching the batch
        cb.on_step_begin(args, state, None)
        clock.t += 1.0 + (3.0 if i == 0 else 0.0)  # the first step is slow
        state.global_step += 1
        state.num_input_tokens_seen += tokens_per_step
        cb.on_step_end(args, state, None)
    cb.on_train_end(args, state, None)
    return json.loads((cb.run_dir / "output" / "metrics.json").read_text())


def test_callback_on_cpu_writes_metrics(tmp_path, monkeypatch):
    from rocmft.callbacks import metrics

    clock = _Clock()
    monkeypatch.setattr(metrics.time, "perf_counter", clock)
    data = _drive(metrics.MetricsCallback(tmp_path), clock, steps=5, tokens_per_step=1000)
    assert data["device"] == "cpu" and data["peak_memory"]["kind"] == "rss" and data["peak_memory"]["rss_gib"] > 0
    assert data["warmup_steps"] == 2 and data["measured_steps"] == 3
    # every measured period is fetch 0.5 + step 1.0
    assert data["step_time_p50_s"] == pytest.approx(1.5) and data["step_time_p90_s"] == pytest.approx(1.5)
    assert data["steps"][0]["period_s"] == pytest.approx(4.0)  # the first step: from its begin, no fetch before it
    assert data["tokens_per_s_per_gpu"] == pytest.approx(3000 / 4.5)
    assert data["micro_batch"] == 4 and data["grad_accum"] == 2 and data["tokens_mode"] == "non_padding"
    assert "torch" in data["versions"] and "llamafactory" in data["versions"]


def test_callback_rocm_branch_plumbing_with_torch_cuda_faked(tmp_path, monkeypatch):
    """A FAKE torch.cuda (this machine has no GPU; the CPU branch runs for real in tests/train/test_bench_cpu.py).
    What it shows: the callback synchronizes the device at step boundaries and routes each torch.cuda reading
    to its field (reserved, not allocated, is the row's peak). What it cannot show: that the numbers a ROCm
    device reports are right, or the timing of a real GPU step."""
    import torch

    from rocmft.callbacks import metrics

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: 40 * 1024 ** 3)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a: 44 * 1024 ** 3)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 16 * 1024 ** 3)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "AMD Instinct MI300X")
    monkeypatch.setenv("ROCMFT_METRICS_TOKENS", "all")
    clock = _Clock()
    monkeypatch.setattr(metrics.time, "perf_counter", clock)
    data = _drive(metrics.MetricsCallback(tmp_path), clock, steps=3, tokens_per_step=8192, world=8, mode="all")
    assert calls.count("sync") >= 7  # train begin + begin/end of each step
    assert data["device"] == "AMD Instinct MI300X"
    assert data["peak_memory"] == {"kind": "gpu", "allocated_gib": 40.0, "reserved_gib": 44.0,
                                   "rss_gib": data["peak_memory"]["rss_gib"], "scope": "this process",
                                   "at_train_begin_gib": 16.0, "parameters": {}}  # _drive hands no model
    assert data["tokens_per_s_per_gpu"] == pytest.approx(8192 / 1.5 / 8)
    assert bench.peak_memory_gib(data) == 44.0


def test_callback_refuses_an_unknown_token_mode(tmp_path, monkeypatch):
    from rocmft.callbacks import metrics

    monkeypatch.setenv("ROCMFT_METRICS_TOKENS", "padding")
    with pytest.raises(ValueError):
        metrics.MetricsCallback(tmp_path)


def test_worker_registers_the_callback_only_with_the_env(tmp_path, monkeypatch):
    from rocmft import worker

    monkeypatch.delenv("ROCMFT_METRICS", raising=False)
    assert not any(type(c).__name__ == "MetricsCallback" for c in worker._callbacks(tmp_path, {}))
    monkeypatch.setenv("ROCMFT_METRICS", "1")
    assert any(type(c).__name__ == "MetricsCallback" for c in worker._callbacks(tmp_path, {}))
