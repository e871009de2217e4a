"""`make bench` / `make bench-report`: one measured row per run in results/bench.csv, and the planner beside it.

A bench run is an ordinary run of the recipe (same render, validation and runtime as `make train`) with a
fixed number of optimizer steps, saving and evaluation off, and rocmft.callbacks.metrics switched on
(ROCMFT_METRICS=1) inside every training process. That callback leaves <run dir>/metrics.json; this module
turns it into one CSV row, appends it without touching the rows already there, and, for the report,
puts the planner's prediction (rocmft.plan.check) beside each row.

No torch here: the host CLI imports this module. See docs/bench.md for what each column means.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import arches, paths, runs
from .problems import Problem, ProblemReport

DEFAULT_STEPS = 20
WARMUP_STEPS = 2  # = rocmft.callbacks.metrics.WARMUP_STEPS (not imported: that module needs transformers)
RESULTS_ENV = "ROCMFT_BENCH_RESULTS"

# The columns, in its order (cutoff / micro-batch / grad-accum split in three), then the three that make
# a row re-plannable by `bench-report`: the compute precision, the steps run, and the overrides the run used.
COLUMNS = (
    "date", "host", "arch", "gpu_model", "gpu_count", "recipe", "model", "method", "zero_stage",
    "cutoff_len", "micro_batch", "grad_accum", "tokens_per_s_per_gpu", "mfu", "peak_mem_gib",
    "step_time_p50_s", "step_time_p90_s", "rocm", "torch", "llamafactory", "deepspeed", "commit",
    "precision", "steps", "overrides",
)
ZERO_STAGES = ("none", "0", "1", "2", "3", "3-offload")
PRECISIONS = ("bf16", "fp16", "fp32")
_METHOD = re.compile(r"^(lora|full|freeze)(\+\d+bit)?$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}(\+dirty)?$")
_DATE = "%Y-%m-%dT%H:%M:%SZ"


# ---------------------------------------------------------------- inputs

def check_steps(value: Any) -> int:
    """STEPS: a whole number of optimizer steps >= 1 (a ProblemReport, exit 2, otherwise)."""
    try:
        steps = int(str(value).strip())
    except (TypeError, ValueError):
        steps = None
    if steps is None or steps <= 0:
        raise ProblemReport([Problem("", "STEPS", f"must be a whole number of optimizer steps >= 1, got `{value}`",
                                     f"e.g. STEPS={DEFAULT_STEPS}: the first steps are warmup and are not measured")])
    return steps


def results_path(explicit: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Path:
    """--results FILE, else $ROCMFT_BENCH_RESULTS, else results/bench.csv in the project."""
    env = os.environ if env is None else env
    chosen = explicit or env.get(RESULTS_ENV) or paths.root() / "results" / "bench.csv"
    return Path(chosen).expanduser()


def bench_overrides(user: Iterable[str], steps: int, lf: Mapping[str, Any]) -> list[str]:
    """The user's overrides, then the bench's own (which win): fixed steps, no saving, no eval, metrics on."""
    extra = [
        f"max_steps={steps}",
        "save_strategy='no'",  # quoted: bare `no` is YAML false
        "eval_strategy='no'",
        "logging_steps=1",
        "plot_loss=false",
        "env.ROCMFT_METRICS=1",
    ]
    if lf.get("neat_packing"):
        # the attention mask carries segment ids there: count every token of the packed sequences
        extra.append("env.ROCMFT_METRICS_TOKENS=all")
    return [*user, *extra]


# ---------------------------------------------------------------- facts for a row

def zero_stage(preset: str) -> str:
    return {"none": "none", "zero0": "0", "zero1": "1", "zero2": "2", "zero3": "3", "zero3-offload": "3-offload"}.get(
        preset, preset)


def method(lf: Mapping[str, Any]) -> str:
    name = str(lf.get("finetuning_type") or "lora")
    bits = lf.get("quantization_bit")
    return f"{name}+{bits}bit" if isinstance(bits, int) and not isinstance(bits, bool) else name


def recipe_spec(path: str, name: str) -> str:
    """How the report finds the recipe again: its name when it is a shipped recipe, else its path."""
    shipped = paths.recipes_dir() / f"{name}.yaml"
    try:
        if shipped.resolve() == Path(path).resolve():
            return name
    except OSError:
        pass
    return runs.relative(Path(path))


def commit(root: Path | None = None) -> str:
    """HEAD, with +dirty when tracked files other than results/ differ: appending rows is not a code change."""
    root = root or paths.root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)results"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def _smi_product() -> str | None:
    """The GPU's marketing name from amd-smi or rocm-smi on this host, when either is installed."""
    if shutil.which("amd-smi"):
        try:
            out = subprocess.run(["amd-smi", "static", "--asic", "--json"], capture_output=True, text=True, timeout=20, check=False)
            data = json.loads(out.stdout)
            items = data if isinstance(data, list) else data.get("gpu_data", [data]) if isinstance(data, dict) else []
            for item in items:
                name = (item.get("asic") or {}).get("market_name") if isinstance(item, dict) else None
                if name and name.upper() != "N/A":
                    return str(name).strip()
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
            pass
    if shutil.which("rocm-smi"):
        try:
            out = subprocess.run(["rocm-smi", "--showproductname", "--json"], capture_output=True, text=True, timeout=20, check=False)
            for card in json.loads(out.stdout).values():
                for key in ("Card Series", "Card series", "Card Model", "Card model"):
                    if isinstance(card, dict) and card.get(key) and card[key] != "N/A":
                        return str(card[key]).strip()
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
            pass
    return None


def gpu_model(arch: arches.Arch, metrics: Mapping[str, Any]) -> str:
    """What the training process saw (torch's device name), else amd-smi/rocm-smi here, else the arch's first
    product; `cpu` on the cpu arch."""
    if not arch.is_gpu:
        return "cpu"
    seen = str(metrics.get("device") or "").strip()
    if seen and seen not in ("gpu", "cpu"):
        return seen
    return _smi_product() or (arch.products[0] if arch.products else arch.name)


def compute_mfu(tokens_per_s_per_gpu: float | None, flops_per_token: float | None, peak_tflops: float | None) -> float | None:
    """Achieved FLOP/s per GPU over the arch's dense peak; None when any part is unknown."""
    if not tokens_per_s_per_gpu or not flops_per_token or not peak_tflops:
        return None
    return tokens_per_s_per_gpu * flops_per_token / (peak_tflops * 1e12)


def peak_memory_gib(metrics: Mapping[str, Any]) -> float | None:
    """GPU: the caching allocator's peak (max_memory_reserved, what counts against the card); CPU: peak RSS."""
    mem = metrics.get("peak_memory") or {}
    if mem.get("kind") == "gpu":
        return mem.get("reserved_gib")
    return mem.get("rss_gib")


def _fmt(value: float | None, digits: int = 6) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:.{digits}g}"


@dataclass
class RowResult:
    row: dict[str, str]
    notes: list[str] = field(default_factory=list)


def build_row(prep, metrics: Mapping[str, Any], plan_result, *, steps: int, stored_overrides: list[str],
              host_versions: Mapping[str, str] | None = None, commit_id: str | None = None,
              now: datetime | None = None) -> RowResult:
    """One CSV row from a finished bench run: the recipe as prepared, its metrics.json, the planner's result."""
    recipe, arch = prep.recipe, prep.arch
    lf = prep.rendered.args
    notes: list[str] = []
    versions = dict(runs.stack_versions() if host_versions is None else host_versions)
    versions.update(metrics.get("versions") or {})  # the training process's view wins (the container's stack)
    tps = metrics.get("tokens_per_s_per_gpu")
    flops = peak = None
    workload = getattr(plan_result, "workload", None) if plan_result is not None else None
    throughput = getattr(plan_result, "throughput", None) if plan_result is not None else None
    if throughput is not None:
        flops, peak = throughput.flops_per_token, throughput.peak_tflops
    mfu = compute_mfu(tps, flops, peak)
    if mfu is None:
        if not arch.peak(prep.rendered.precision.name):
            notes.append(f"MFU left empty: docker/arches.yaml has no {prep.rendered.precision.name} peak for "
                         f"arch `{arch.name}`")
        elif workload is None:
            notes.append("MFU left empty: the planner could not model this recipe (no FLOPs per token)")
        else:
            notes.append("MFU left empty: no tokens/s was measured")
    rocm = versions.get("rocm") or versions.get("rocm_installed") or ("none" if not arch.is_gpu else "")
    row = {
        "date": (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(_DATE),
        "host": str(metrics.get("host") or socket.gethostname()),
        "arch": arch.name,
        "gpu_model": gpu_model(arch, metrics),
        "gpu_count": str(int(metrics.get("world_size") or recipe.world_size)),
        "recipe": recipe_spec(recipe.path, recipe.name),
        "model": str(lf.get("model_name_or_path") or ""),
        "method": method(lf),
        "zero_stage": zero_stage(recipe.deepspeed),
        "cutoff_len": str(int(lf.get("cutoff_len", 2048))),  # LLaMA-Factory's default
        "micro_batch": str(int(metrics.get("micro_batch") or lf.get("per_device_train_batch_size", 8))),
        "grad_accum": str(int(metrics.get("grad_accum") or lf.get("gradient_accumulation_steps", 1))),
        "tokens_per_s_per_gpu": _fmt(tps),
        "mfu": _fmt(mfu, 4),
        "peak_mem_gib": _fmt(peak_memory_gib(metrics), 5),
        "step_time_p50_s": _fmt(metrics.get("step_time_p50_s")),
        "step_time_p90_s": _fmt(metrics.get("step_time_p90_s")),
        "rocm": rocm,
        "torch": versions.get("torch", ""),
        "llamafactory": versions.get("llamafactory", ""),
        "deepspeed": versions.get("deepspeed", "none"),
        "commit": commit_id or commit(),
        "precision": prep.rendered.precision.name,
        "steps": str(steps),
        "overrides": shlex.join(stored_overrides),
    }
    return RowResult(row, notes)


# ---------------------------------------------------------------- a bench run dir, recorded later

BENCH_FILE = "bench.json"  # in the run dir: what `rocmft bench --record` needs when the job ends after bench returns


def write_record(run_dir: Path, *, recipe_name: str, recipe_path: str, steps: int, stored_overrides: list[str]) -> None:
    runs.write_json(run_dir / BENCH_FILE, {"recipe": recipe_name, "recipe_path": recipe_path, "steps": steps,
                                           "overrides": stored_overrides, "recorded_in": None})


def read_record(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / BENCH_FILE).read_text())
    except (OSError, ValueError):
        raise ProblemReport([Problem(str(run_dir), "", f"not a bench run: no readable {BENCH_FILE}",
                                     "--record takes a run dir made by `rocmft bench`")]) from None


def mark_recorded(run_dir: Path, results: Path) -> None:
    record = read_record(run_dir)
    record["recorded_in"] = str(results.resolve())
    runs.write_json(run_dir / BENCH_FILE, record)


def prepared_from_run(run_dir: Path, record: Mapping[str, Any]):
    """The run as `pipeline.prepare` had it, from the files in its run dir (not from today's recipe)."""
    import dataclasses

    from . import pipeline, recipes, render

    resolved = run_dir / "recipe.resolved.yaml"
    if not resolved.is_file():
        raise ProblemReport([Problem(str(run_dir), "", "no recipe.resolved.yaml: not a run dir")])
    recipe = recipes.load(str(resolved))
    recipe = dataclasses.replace(recipe, name=str(record["recipe"]), path=str(record.get("recipe_path") or resolved))
    run_path = runs.relative(run_dir)
    rendered = render.render(recipe, run_path)
    return pipeline.Prepared(recipe, arches.get(recipe.arch), rendered, run_dir, run_path, None, None)


# ---------------------------------------------------------------- checking a row

def _number(row: Mapping[str, str], key: str, problems: list[str], *, integer: bool = False,
            minimum: float | None = None, maximum: float | None = None, positive: bool = False,
            optional: bool = False) -> float | None:
    text = (row.get(key) or "").strip()
    if text == "":
        if not optional:
            problems.append(f"{key}: empty")
        return None
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        problems.append(f"{key}: `{text}` is not {'a whole number' if integer else 'a number'}")
        return None
    if not math.isfinite(value):
        problems.append(f"{key}: `{text}` is not finite")
        return None
    if positive and value <= 0:
        problems.append(f"{key}: must be > 0, got {text}")
    if minimum is not None and value < minimum:
        problems.append(f"{key}: must be >= {minimum:g}, got {text}")
    if maximum is not None and value > maximum:
        problems.append(f"{key}: must be <= {maximum:g}, got {text}")
    return value


def validate_row(row: Mapping[str, str]) -> list[str]:
    """What is wrong with a row (empty: a valid row). Used before appending and on every row the report reads."""
    problems: list[str] = []
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        return [f"missing columns: {', '.join(missing)}"]
    try:
        datetime.strptime(row["date"], _DATE)
    except ValueError:
        problems.append(f"date: `{row['date']}` is not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ)")
    for key in ("host", "gpu_model", "recipe", "model", "torch", "llamafactory", "deepspeed", "rocm"):
        if not (row.get(key) or "").strip():
            problems.append(f"{key}: empty")
    table = arches.table()
    arch = table.get(row["arch"])
    if arch is None:
        problems.append(f"arch: unknown arch `{row['arch']}` (known: {', '.join(table)})")
    _number(row, "gpu_count", problems, integer=True, minimum=1)
    if row["method"] and not _METHOD.match(row["method"]):
        problems.append(f"method: `{row['method']}` is not lora, full or freeze (with +4bit/+8bit for quantized)")
    if row["zero_stage"] not in ZERO_STAGES:
        problems.append(f"zero_stage: `{row['zero_stage']}` is not one of {', '.join(ZERO_STAGES)}")
    for key in ("cutoff_len", "micro_batch", "grad_accum", "steps"):
        _number(row, key, problems, integer=True, minimum=1)
    _number(row, "tokens_per_s_per_gpu", problems, positive=True)
    _number(row, "mfu", problems, optional=True, positive=True, maximum=1.0)  # empty: no known peak
    _number(row, "peak_mem_gib", problems, positive=True)
    p50 = _number(row, "step_time_p50_s", problems, positive=True)
    p90 = _number(row, "step_time_p90_s", problems, positive=True)
    if p50 is not None and p90 is not None and p90 < p50:
        problems.append(f"step_time_p90_s ({p90:g}) is below step_time_p50_s ({p50:g})")
    if arch is not None and arch.is_gpu and row["rocm"] in ("", "none"):
        problems.append("rocm: a GPU row needs the ROCm version")
    if not _COMMIT.match(row["commit"]):
        problems.append(f"commit: `{row['commit']}` is not a git commit id")
    if row["precision"] not in PRECISIONS:
        problems.append(f"precision: `{row['precision']}` is not one of {', '.join(PRECISIONS)}")
    try:
        shlex.split(row["overrides"])
    except ValueError as exc:
        problems.append(f"overrides: not a shell-quoted list ({exc})")
    return problems


# ---------------------------------------------------------------- the CSV file

def _line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


HEADER_LINE = _line(COLUMNS)


def check_results_file(path: Path) -> None:
    """Before a run is spent: the file, if it exists, has our header; its folder can be created."""
    if path.is_dir():
        raise ProblemReport([Problem("", "RESULTS", f"{path} is a directory", "name a .csv file")])
    if path.is_file() and path.stat().st_size > 0:
        with open(path, encoding="utf-8", newline="") as fh:
            first = fh.readline()
        if first.rstrip("\r\n") != HEADER_LINE.rstrip("\n"):
            raise ProblemReport([Problem(str(path), "", "the header is not rocmft's bench columns",
                                         f"append to another file with --results / RESULTS= (columns: {','.join(COLUMNS)})")])


def append_row(path: Path, row: Mapping[str, str]) -> None:
    """Append one row: created with the header when missing; rows already there are never rewritten.

    Atomic against concurrent benches: an exclusive lock, then the whole line in one O_APPEND write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        text = _line(row.get(c, "") for c in COLUMNS)
        if size == 0:
            text = HEADER_LINE + text
        else:
            check_results_file(path)
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    text = "\n" + text  # a hand edit left no final newline: never glue our row onto it
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for every data row; a missing file reads as no rows."""
    if not path.is_file():
        return []
    check_results_file(path)
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return [(reader.line_num, dict(r)) for r in reader if any((v or "").strip() for v in r.values() if isinstance(v, str))]


# ---------------------------------------------------------------- the planner beside a row

@dataclass
class Prediction:
    memory_gib: float | None = None  # what torch's allocator should hold: the plan minus its HIP context/RCCL reserve
    plan_total_gib: float | None = None  # the planner's per-GPU total, reserve included
    tokens_per_s: tuple[float, float] | None = None
    mfu: tuple[float, float] | None = None  # the planner's utilisation range x its speed factors
    notes: list[str] = field(default_factory=list)


def _workload_differs(row: Mapping[str, str], w) -> list[str]:
    found = {"cutoff_len": w.cutoff_len, "micro_batch": w.micro_batch, "grad_accum": w.grad_accum,
             "gpu_count": w.world_size}
    return [f"{k} {row.get(k)} -> {v}" for k, v in found.items() if str(row.get(k, "")).strip() != str(v)]


def predict(row: Mapping[str, str]) -> Prediction:
    """Re-plan the row's recipe with the overrides it ran with (the planner as it is now)."""
    from . import recipes

    try:
        from . import plan as planner
        from .plan import memory as plan_memory
    except ImportError as exc:
        return Prediction(notes=[f"planner not available: {exc}"])
    pred = Prediction()
    try:
        overrides = shlex.split(row.get("overrides") or "")
        steps = int(row.get("steps") or 1)
        recipe = recipes.load(row["recipe"], overrides)
        result = planner.check(recipe, steps=max(steps, 1))
    except ProblemReport as exc:
        pred.notes.append("no prediction: " + "; ".join(p.message for p in exc.problems))
        return pred
    except (ValueError, KeyError) as exc:
        pred.notes.append(f"no prediction: {exc}")
        return pred
    if result.workload is None or result.memory is None:
        why = "; ".join(p.message for p in result.problems if p.severity == "error") or "the planner could not model it"
        pred.notes.append(f"no prediction: {why}")
        return pred
    w, mem, tp = result.workload, result.memory, result.throughput
    changed = _workload_differs(row, w)
    if changed:
        pred.notes.append("the recipe changed since this row (" + ", ".join(changed) + "): predicted for it as it is now")
    # The plan's reserve = HIP context (+ RCCL) + allocator fragmentation. torch.cuda.max_memory_reserved (the
    # measured column) holds the fragmentation but not the context, so the comparable figure drops the rest.
    reserve = mem.gib("reserve")
    used = mem.total_gib - reserve
    runtime = max(reserve - plan_memory.FRAGMENTATION * used, 0.0)
    pred.plan_total_gib = mem.total_gib
    pred.memory_gib = mem.total_gib - runtime
    if tp is not None and tp.tokens_per_s_gpu is not None:
        pred.tokens_per_s = tp.tokens_per_s_gpu
        pred.mfu = (tp.mfu[0] * tp.factor, tp.mfu[1] * tp.factor)
    elif tp is not None and tp.notes:
        pred.notes.append(tp.notes[0])
    return pred


def error_pct(measured: float | None, predicted: float | None) -> float | None:
    """(predicted - measured) / measured in %: + when the planner predicted more than was measured."""
    if measured is None or predicted is None or measured <= 0:
        return None
    return (predicted - measured) / measured * 100.0


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


@dataclass
class ReportLine:
    number: int
    line: int
    row: dict[str, str]
    pred: Prediction
    tps: float | None
    tps_err: float | None
    mem: float | None
    mem_err: float | None
    mem_comparable: bool


def compare(numbered_rows: list[tuple[int, dict[str, str]]]) -> list[ReportLine]:
    out = []
    for i, (line, row) in enumerate(numbered_rows, 1):
        pred = predict(row)
        tps, mem = _float(row.get("tokens_per_s_per_gpu")), _float(row.get("peak_mem_gib"))
        arch = arches.table().get(row.get("arch", ""))
        comparable = arch is not None and arch.is_gpu  # a CPU row's memory is the process RSS, not a GPU's
        mid = sum(pred.tokens_per_s) / 2 if pred.tokens_per_s else None
        out.append(ReportLine(i, line, row, pred, tps, error_pct(tps, mid), mem,
                              error_pct(mem, pred.memory_gib) if comparable else None, comparable))
    return out


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
        mfu = _float(row.get("mfu"))
        pred_mfu = "-" if not pred.mfu else f"{pred.mfu[0]:.2f}-{pred.mfu[1]:.2f}"
        body.append((
            str(r.number), (row.get("date") or "")[:10], row.get("arch", ""), row.get("gpu_model", ""),
            row.get("gpu_count", ""), row.get("recipe", ""), row.get("method", ""), row.get("zero_stage", ""),
            f"{row.get('cutoff_len')}/{row.get('micro_batch')}/{row.get('grad_accum')}",
            _num(r.tps), tps_pred, _pct(r.tps_err),
            _num(r.mem) + ("" if r.mem_comparable else " rss"), _num(pred.memory_gib), _pct(r.mem_err) if r.mem_comparable else "n/c",
            "-" if mfu is None else f"{mfu:.3f}", pred_mfu,
            f"{_num(_float(row.get('step_time_p50_s')))}/{_num(_float(row.get('step_time_p90_s')))}",
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
