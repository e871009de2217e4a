"""First hardware truth: measure on one GPU what the planner predicts, configuration by configuration.

    python3 benchmarks/gpu_truth.py bundle                 # here: the pinned wheels a bare GPU machine lacks
    python3 benchmarks/gpu_truth.py run --bundle wheelhouse/gpu_truth   # there: one command, the whole matrix
    .venv/bin/python benchmarks/gpu_truth.py run --dry-run # CPU: the same code, tiny model, two configurations

Each configuration is an ordinary `rocmft bench` run (render, LLaMA-Factory's own validation, the planner's
fit check, RUNTIME=local, the worker and its callbacks as `make train` runs them) of a shipped recipe with a
few overrides, on a randomly initialised model of the recipe's real shape: the planner's model table gives
the config (Llama-3-8B), the tiny model gives the tokenizer, weights are drawn on the GPU and written once
(never downloaded). The data is the demo's alpaca rows repeated, so lengths follow the demo's distribution.
The metrics callback measures step times (warm-up steps left out), real tokens (what the collator was handed,
before padding or packing) and peak allocated/reserved memory (torch's counters); beside each, `rocmft plan`'s
prediction for exactly that configuration on this GPU's product (`plan.product`: an arch product, or a
calibration product of docker/arches.yaml such as H200) and the ratio measured/predicted.

Output: results/gpu_truth-<gpu>.csv and .md (the table is printed last). --dry-run writes under the work
dir only and makes no timing claims. docs/bench.md says how to run it on any GPU and send the CSV back.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
GIB = 1024 ** 3

# The pinned pure-Python wheels (plus tokenizers and pydantic-core, binary) a machine with torch,
# transformers, numpy, pyarrow, pandas and triton preinstalled lacks for LLaMA-Factory 0.9.5's training path;
# found by importing that path in the CPU venv and removing what such a machine ships (device KINDS.md).
# Versions come from requirements/lock.txt; the ones the lock cannot hold from image/versions.py.
BUNDLE = ("llamafactory", "transformers", "tokenizers", "datasets", "peft", "trl", "accelerate", "deepspeed",
          "liger-kernel", "hjson", "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "dill",
          "multiprocess", "omegaconf", "fsspec", "pytz", "docstring-parser",
          "huggingface-hub", "safetensors", "py-cpuinfo", "msgpack", "ninja", "regex", "tqdm", "docker")
BUNDLE_LIMIT_MIB = 64  # what the device tool carries; the bundle must stay well under it


@dataclass(frozen=True)
class Config:
    name: str
    recipe: str
    overrides: tuple[str, ...]
    what: str


# What matters to the shipped recipes, each against the recipe as shipped (llama3-8b-lora: LoRA r16, neat
# packing 1 x 8192, Liger, no recompute). One process each; accumulation 1 so a step is one micro-batch.
GPU_MATRIX = (
    Config("lora-neat", "llama3-8b-lora", (), "LoRA r16, neat packing 1x8192, Liger, no recompute (the recipe)"),
    Config("lora-padded", "llama3-8b-lora",
           ("neat_packing=false", "packing=false", "cutoff_len=2048", "per_device_train_batch_size=4"),
           "padded rows: 4 per micro-batch, padded to the longest (the demo's lengths)"),
    Config("lora-neat-noliger", "llama3-8b-lora", ("enable_liger_kernel=false",), "Liger off: full logits"),
    Config("lora-neat-recompute", "llama3-8b-lora", ("disable_gradient_checkpointing=false",),
           "gradient checkpointing on"),
    Config("lora-neat-z3", "llama3-8b-z3", ("gpus_per_node=1",), "DeepSpeed ZeRO-3 on one process"),
    # why lora-neat-z3 measured 1.37x its planned memory: is Liger's fused loss in effect under ZeRO-3?
    Config("lora-neat-z3-noliger", "llama3-8b-z3", ("gpus_per_node=1", "enable_liger_kernel=false"),
           "ZeRO-3, Liger off: the memory lora-neat-z3 would have without Liger's fused loss"),
    # Liger named: the recipe no longer enables it (ZeRO-3 + a trainable lm_head, rocmft.rules); without ZeRO-3 it is safe
    Config("full-neat-purebf16", "llama3-8b-full-z3",
           ("gpus_per_node=1", "deepspeed=none", "pure_bf16=true", "enable_liger_kernel=true"),
           "full fine-tune, pure bf16 (no fp32 master), no DeepSpeed: the full point that fits one card"),
)
# Asked for by name only (--only): the allocator's history on (callbacks/memory_trace.py), which slows the steps,
# so their tokens/s are not the recipe's; metrics.json's memory_trace says what was live at the peak, by library.
TRACE_MATRIX = (
    Config("lora-neat-trace", "llama3-8b-lora", ("env.ROCMFT_MEMORY_TRACE=1",),
           "lora-neat with the allocator history: what is live at the peak"),
    Config("lora-neat-z3-trace", "llama3-8b-z3", ("gpus_per_node=1", "env.ROCMFT_MEMORY_TRACE=1"),
           "lora-neat-z3 with the allocator history: what ZeRO-3 adds at the peak"),
)
DRY_MATRIX = (
    Config("lora-neat", "tiny-cpu", (), "tiny-cpu as shipped (LoRA, neat packing)"),
    Config("lora-padded", "tiny-cpu", ("neat_packing=false", "packing=false"), "padded rows"),
)
COMMON = ("gradient_accumulation_steps=1", "val_size=0", "preprocessing_num_workers=1")

COLUMNS = ("config", "recipe", "overrides", "status", "gpu", "product", "steps_measured",
           "step_time_s", "real_tokens_per_s", "pred_tokens_per_s_lo", "pred_tokens_per_s_hi", "ratio_tokens_per_s",
           "peak_allocated_gib", "peak_reserved_gib", "pred_memory_gib", "ratio_memory", "pred_verdict", "note")


# ---------------------------------------------------------------- the bundle (prepared on the host)

def lock_pins() -> dict[str, str]:
    sys.path.insert(0, str(SRC))
    from rocmft.image import versions

    pins = versions.read_pins(versions.lock_file())
    pins.setdefault("liger-kernel", versions.LIGER_KERNEL_VERSION)
    return pins


def bundle(out: Path) -> int:
    """Download the pinned wheels (py3.12, manylinux x86_64) and build DeepSpeed's (an sdist) with no ops."""
    pins = lock_pins()
    missing = [n for n in BUNDLE if n not in pins]
    if missing:
        print(f"gpu_truth bundle: no pin in requirements/lock.txt for {', '.join(missing)}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    wheels = [f"{n}=={pins[n]}" for n in BUNDLE if n != "deepspeed"]
    platform = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platform, "-d", str(out), *wheels], check=True)
    # DeepSpeed ships an sdist only; built without ops (DS_BUILD_OPS=0) it is a pure-Python wheel whose ops
    # JIT-compile where they are used (none are: no optimizer block, no offload in this matrix).
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                    f"deepspeed=={pins['deepspeed']}"], check=True, env=env)
    size = sum(p.stat().st_size for p in out.glob("*.whl")) / 2 ** 20
    (out / "BUNDLE.txt").write_text("".join(f"{p.name}\n" for p in sorted(out.glob("*.whl"))))
    print(f"gpu_truth bundle: {len(list(out.glob('*.whl')))} wheels, {size:.1f} MiB in {out}")
    if size > BUNDLE_LIMIT_MIB:
        print(f"gpu_truth bundle: over {BUNDLE_LIMIT_MIB} MiB", file=sys.stderr)
        return 1
    return 0


def install_bundle(wheels: Path, site: Path) -> None:
    """--no-deps into a target folder: nothing compiled, the machine's torch/numpy/triton untouched."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise SystemExit(f"gpu_truth: no wheels in {wheels} (prepare them with: python3 benchmarks/gpu_truth.py bundle)")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, found)], check=True)
    print(f"gpu_truth: {len(found)} wheels installed into {site} in {time.perf_counter() - t0:.0f} s", flush=True)


PREFLIGHT = """
import importlib, importlib.metadata as m
for mod in ("torch", "transformers", "llamafactory.train.tuner", "peft", "trl", "datasets", "deepspeed",
            "liger_kernel.transformers", "rocmft.worker"):
    try:
        importlib.import_module(mod)
        print("ok  ", mod)
    except Exception as exc:
        print("FAIL", mod, type(exc).__name__, str(exc)[:300])
print("versions:", {d: m.version(d) for d in ("torch", "transformers", "llamafactory", "peft", "trl", "datasets",
                                              "accelerate", "deepspeed", "liger-kernel", "triton") if _has(d)})
"""


def preflight(env: dict, log) -> None:
    """Import the training path once, before any configuration: a missing package shows here, named."""
    code = "def _has(d):\n    import importlib.metadata as m\n    try:\n        m.version(d); return True\n" \
           "    except m.PackageNotFoundError:\n        return False\n" + PREFLIGHT
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    log("preflight (imports of the training path):\n" + "\n".join(
        line for line in proc.stdout.splitlines() if line.startswith(("ok", "FAIL", "versions"))))


# ---------------------------------------------------------------- the model and the data

def model_config(spec, tokenizer_dir: Path) -> dict:
    """A transformers config of the planner's model shape, with the tiny tokenizer's special token ids."""
    special = json.loads((tokenizer_dir / "config.json").read_text())
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers, "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads, "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size, "tie_word_embeddings": spec.tie_word_embeddings,
        "attention_bias": spec.attention_bias, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}, "hidden_act": "silu", "initializer_range": 0.02, "dtype": "bfloat16",
        "bos_token_id": special.get("bos_token_id"), "eos_token_id": special.get("eos_token_id"),
        "pad_token_id": special.get("pad_token_id"),
    }


def random_model(config: dict, tokenizer_dir: Path, out: Path, device: str) -> float:
    """Random weights of `config` drawn on `device`, saved as safetensors with the tiny tokenizer; seconds taken."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    cfg = AutoConfig.for_model(**config)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(out, max_shard_size="4GB")
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    for name in os.listdir(tokenizer_dir):
        if name.startswith(("tokenizer", "special_tokens")) or name == "chat_template.jinja":
            shutil.copy2(tokenizer_dir / name, out / name)
    return time.perf_counter() - t0


def shape_only(config: dict, tokenizer_dir: Path, out: Path) -> Path:
    """What the planner reads of a model (config.json, the tokenizer for row lengths), without weights."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in os.listdir(tokenizer_dir):
        if name.startswith(("tokenizer", "special_tokens")) or name == "chat_template.jinja":
            shutil.copy2(tokenizer_dir / name, out / name)
    return out


def demo_data(folder: Path, repeats: int) -> str:
    """The demo's alpaca rows repeated `repeats` times under `folder`, registered as `gpu_truth_alpaca`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = (ROOT / "data" / "demo_alpaca.jsonl").read_text().splitlines()
    (folder / "gpu_truth_alpaca.jsonl").write_text("".join(f"{r}\n" for _ in range(repeats) for r in rows if r.strip()))
    info = json.loads((ROOT / "data" / "dataset_info.json").read_text())["demo_alpaca"]
    (folder / "dataset_info.json").write_text(json.dumps({"gpu_truth_alpaca": {**info, "file_name": "gpu_truth_alpaca.jsonl"}}))
    return "gpu_truth_alpaca"


# ---------------------------------------------------------------- one configuration

@dataclass
class Result:
    config: Config
    overrides: list[str]
    status: str = "not run"
    metrics: dict = field(default_factory=dict)
    prediction: object | None = None
    verdict: str = ""
    note: str = ""


def rocmft_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from rocmft.cli.main import main; sys.exit(main())", *args]


def run_config(cfg: Config, common: list[str], steps: int, work: Path, env: dict, timeout: int, log) -> Result:
    overrides = [*cfg.overrides, *common]
    res = Result(cfg, overrides)
    name = f"gpu_truth-{cfg.name}-{dt.datetime.now():%H%M%S}"
    argv = rocmft_argv("bench", cfg.recipe, *overrides, "--steps", str(steps), "--runtime", "local",
                       "--run-name", name, "--results", str(work / "bench.csv"), "--force", "--quiet")
    log(f"\n=== {cfg.name}: {cfg.what}\n$ rocmft bench {cfg.recipe} {shlex.join(overrides)} --steps {steps}")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        output, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), None
    log(output[-3000:] if code else "\n".join(output.splitlines()[-4:]))
    from rocmft.jobfiles import METRICS, job_file

    run_dir = Path(env.get("ROCMFT_RUNS") or ROOT / "runs") / name
    metrics = job_file(run_dir, METRICS)  # written by the job, in its own folder of the run dir
    if metrics.is_file():
        res.metrics = json.loads(metrics.read_text())
        res.status = "ok"
    else:
        res.status = "timeout" if code is None else f"failed ({code})"
        tail = [line for line in output.splitlines() if line.strip()][-1:] or [""]
        res.note = tail[0][:200]
        train_log = run_dir / "train.log"
        if train_log.is_file():
            log("--- train.log tail:\n" + "\n".join(train_log.read_text(errors="replace").splitlines()[-40:]))
    log(f"    {res.status} in {time.perf_counter() - t0:.0f} s")
    return res


def predict(res: Result, steps: int) -> None:
    from rocmft import bench, plan, recipes

    res.prediction = bench.predict({"recipe": res.config.recipe, "overrides": shlex.join(res.overrides),
                                    "steps": str(steps)})
    try:
        res.verdict = plan.check(recipes.load(res.config.recipe, res.overrides), steps=steps).verdict
    except Exception as exc:  # noqa: BLE001 - a verdict the planner cannot give is a note, not a lost row
        res.verdict = f"unknown ({exc})"


# ---------------------------------------------------------------- the table

def _num(value, digits=1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def ratio(measured: float | None, predicted: float | None) -> float | None:
    """measured / predicted: 1.0 when the planner was right, >1 when the GPU did more (or used more)."""
    if measured is None or predicted in (None, 0):
        return None
    return measured / predicted


def row(res: Result, gpu: str, product: str) -> dict[str, str]:
    m, pred = res.metrics, res.prediction
    peak = m.get("peak_memory") or {}
    real_tps = m.get("real_tokens_per_s_per_gpu")
    lo_hi = getattr(pred, "tokens_per_s", None)
    mid = sum(lo_hi) / 2 if lo_hi else None
    mem_pred = getattr(pred, "memory_gib", None)
    reserved = peak.get("reserved_gib")
    notes = [res.note] if res.note else []
    notes += getattr(pred, "notes", []) or []
    return {
        "config": res.config.name, "recipe": res.config.recipe, "overrides": " ".join(res.overrides),
        "status": res.status, "gpu": gpu, "product": product,
        "steps_measured": str(m.get("measured_steps", "")),
        "step_time_s": _num(m.get("step_time_mean_s"), 3),
        "real_tokens_per_s": _num(real_tps, 0),
        "pred_tokens_per_s_lo": _num(lo_hi[0], 0) if lo_hi else "",
        "pred_tokens_per_s_hi": _num(lo_hi[1], 0) if lo_hi else "",
        "ratio_tokens_per_s": _num(ratio(real_tps, mid), 2),
        "peak_allocated_gib": _num(peak.get("allocated_gib"), 2),
        "peak_reserved_gib": _num(reserved, 2),
        "pred_memory_gib": _num(mem_pred, 2),
        "ratio_memory": _num(ratio(reserved, mem_pred), 2),
        "pred_verdict": res.verdict,
        "note": "; ".join(n.replace("\n", " ") for n in notes)[:300],
    }


def to_csv(rows: list[dict[str, str]], header: str) -> str:
    buf = io.StringIO()
    for line in header.splitlines():
        buf.write(f"# {line}\n")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


MD_COLUMNS = (("config", "config"), ("status", "status"), ("step s", "step_time_s"),
              ("real tok/s", "real_tokens_per_s"), ("planned tok/s", None), ("tok/s ratio", "ratio_tokens_per_s"),
              ("peak alloc GiB", "peak_allocated_gib"), ("peak reserved GiB", "peak_reserved_gib"),
              ("planned GiB", "pred_memory_gib"), ("memory ratio", "ratio_memory"))


def to_markdown(rows: list[dict[str, str]], header: str) -> str:
    lines = [*(f"{h}  " for h in header.splitlines()), "",
             "| " + " | ".join(h for h, _ in MD_COLUMNS) + " |", "|" + "---|" * len(MD_COLUMNS)]
    for r in rows:
        planned = f"{r['pred_tokens_per_s_lo']}-{r['pred_tokens_per_s_hi']}" if r["pred_tokens_per_s_lo"] else ""
        cells = [planned if key is None else (r[key] or "-") for _, key in MD_COLUMNS]
        lines.append("| " + " | ".join(c or "-" for c in cells) + " |")
    lines += ["", "Ratios are measured / planned (tokens/s against the middle of the planned range; memory: torch's "
              "peak reserved against the plan without its runtime reserve). Real tokens: what the collator was "
              "handed, before padding or packing."]
    return "\n".join(lines) + "\n"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


# ---------------------------------------------------------------- the planner as it is now, beside a measured CSV

def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(the header comment lines, the rows) of a gpu_truth CSV."""
    lines = path.read_text().splitlines()
    header = [line[2:] for line in lines if line.startswith("# ")]
    body = [line for line in lines if not line.startswith("#")]
    return header, list(csv.DictReader(body))


def replanned(rows: list[dict[str, str]], work: Path, steps: int = 6) -> list[dict[str, str]]:
    """Each measured row re-planned by the current planner: the run's model shape and data rebuilt here
    (config.json and the tiny tokenizer, no weights; the demo rows repeated as `run` does)."""
    sys.path.insert(0, str(SRC))
    from rocmft import recipes
    from rocmft.plan import models

    tiny = ROOT / "models" / "tiny-llama"
    if not (tiny / "config.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py")], check=True, cwd=ROOT)
    demo_data(work / "data", 20)
    out = []
    for r in rows:
        overrides = shlex.split(r["overrides"])
        model = next(o.split("=", 1)[1] for o in overrides if o.startswith("model_name_or_path="))
        spec = models.from_table(recipes.load(r["recipe"]).llamafactory["model_name_or_path"])
        local = shape_only(model_config(spec, tiny), tiny, work / Path(model).name)
        fixed = [f"model_name_or_path={local}" if o.startswith("model_name_or_path=") else
                 f"dataset_dir={work / 'data'}" if o.startswith("dataset_dir=") else o for o in overrides]
        res = Result(Config(r["config"], r["recipe"], (), ""), fixed, status=r["status"])
        predict(res, steps)
        lo_hi = getattr(res.prediction, "tokens_per_s", None)
        mem = getattr(res.prediction, "memory_gib", None)
        measured_tps, measured_mem = float(r["real_tokens_per_s"] or 0) or None, float(r["peak_reserved_gib"] or 0) or None
        out.append({**r, "now_tokens_per_s": f"{lo_hi[0]:.0f}-{lo_hi[1]:.0f}" if lo_hi else "",
                    "now_ratio_tokens_per_s": _num(ratio(measured_tps, sum(lo_hi) / 2 if lo_hi else None), 2),
                    "now_memory_gib": _num(mem, 2), "now_ratio_memory": _num(ratio(measured_mem, mem), 2)})
    return out


def report(args) -> int:
    path = Path(args.csv)
    header, rows = read_csv(path)
    now = replanned(rows, Path(args.work).resolve())
    cols = ("config", "real_tokens_per_s", "pred_tokens_per_s_lo", "ratio_tokens_per_s", "now_tokens_per_s",
            "now_ratio_tokens_per_s", "peak_reserved_gib", "pred_memory_gib", "ratio_memory", "now_memory_gib",
            "now_ratio_memory")
    names = ("config", "real tok/s", "planned then", "ratio then", "planned now", "ratio now", "reserved GiB",
             "planned GiB then", "ratio then", "planned GiB now", "ratio now")
    lines = [*(f"{h}  " for h in header), "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for r in now:
        then = f"{r['pred_tokens_per_s_lo']}-{r['pred_tokens_per_s_hi']}" if r["pred_tokens_per_s_lo"] else "-"
        cells = [then if c == "pred_tokens_per_s_lo" else (r.get(c) or "-") for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "then: the planner when the row was measured; now: the planner of this checkout (measured / planned)."]
    text = "\n".join(lines) + "\n"
    if args.write:
        path.with_suffix(".md").write_text(text)
    print(text)
    return 0


# ---------------------------------------------------------------- the run

def device_facts(dry: bool) -> tuple[str, str]:
    """(device name, torch build) of what the configurations will run on."""
    import torch

    if dry or not torch.cuda.is_available():
        return "cpu", torch.__version__
    build = f"HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}"
    return torch.cuda.get_device_name(0), f"{torch.__version__} ({build})"


def choose_product(gpu: str, asked: str | None, recipe_arch: str) -> str | None:
    from rocmft import arches

    if asked:
        return asked
    cal = arches.calibration_for_device(gpu)
    if cal is not None:
        return cal.name
    arch = arches.table().get(recipe_arch)
    return arch.identify(None, None, gpu) if arch is not None else None


def run(args) -> int:
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.bundle:
        site = work / "site"
        install_bundle(Path(args.bundle), site)
        sys.path.insert(0, str(site))
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    sys.path.insert(0, str(SRC))
    # A bare machine has newer packages than LLaMA-Factory's range only where the bundle did not replace them.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("HF_HOME", str(work / "hf_home"))
    env.setdefault("MPLCONFIGDIR", str(work / "mpl"))
    env.setdefault("TORCH_EXTENSIONS_DIR", str(work / "torch_extensions"))

    from rocmft.plan import models

    logfile = Path(args.log or work / "gpu_truth.log").open("a")

    def log(text: str) -> None:
        print(text, flush=True)
        logfile.write(text + "\n")
        logfile.flush()

    gpu, torch_build = device_facts(args.dry_run)
    if gpu == "cpu" and not args.dry_run:
        raise SystemExit("gpu_truth: torch sees no GPU here: run it on the GPU machine (docs/bench.md), or --dry-run "
                         "(make gpu-truth DRY_RUN=1) to rehearse it on CPU")
    matrix = DRY_MATRIX if args.dry_run else GPU_MATRIX
    if args.only:
        wanted = set(args.only.split(","))
        matrix = tuple(c for c in (*matrix, *(() if args.dry_run else TRACE_MATRIX)) if c.name in wanted)
    tiny = ROOT / "models" / "tiny-llama"
    if not (tiny / "config.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py")], check=True, env=env, cwd=ROOT)
    common = list(COMMON)
    product = None
    if args.dry_run:
        # The same model builder as on a GPU, with the tiny model's own shape (fp32 on CPU).
        spec_config = json.loads((tiny / "config.json").read_text())
        model_dir = work / "model-tiny-random"
        config = {k: spec_config[k] for k in spec_config if k not in ("transformers_version", "torch_dtype")}
        seconds = random_model(config, tiny, model_dir, "cpu")
    else:
        from rocmft import recipes

        first = recipes.load(matrix[0].recipe)
        spec = models.from_table(first.llamafactory["model_name_or_path"])
        if spec is None:
            raise SystemExit(f"gpu_truth: {first.llamafactory['model_name_or_path']} is not in the planner's model table")
        model_dir = work / f"model-{slug(spec.name)}-random"
        if not (model_dir / "config.json").is_file() or args.fresh_model:
            seconds = random_model(model_config(spec, tiny), tiny, model_dir, "cuda")
        else:
            seconds = 0.0
        product = choose_product(gpu, args.product, first.arch)
        if product:
            common.append(f"plan.product={product}")
        import importlib.util

        if importlib.util.find_spec("flash_attn") is None:
            common.append("flash_attn=sdpa")  # no flash-attn on this machine: SDPA, planned as SDPA
    log(f"gpu_truth: {gpu}, torch {torch_build}, product {product or '(none: no prediction)'}; model {model_dir.name} "
        f"({'built' if seconds else 'kept'} {seconds:.0f} s)")
    preflight(env, log)
    data = demo_data(work / "data", args.repeats)
    common += [f"model_name_or_path={model_dir}", f"dataset_dir={work / 'data'}", f"dataset={data}"]
    if args.dry_run:
        common += ["cutoff_len=128"]
    started = time.perf_counter()
    out_dir = Path(args.out).resolve() if args.out else (work if args.dry_run else ROOT / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"gpu_truth-{slug(gpu)}"
    results: list[Result] = []
    for cfg in matrix:
        left = args.deadline - (time.perf_counter() - T0) if args.deadline else None
        if left is not None and left < args.min_left:
            log(f"\n=== {cfg.name}: skipped, {left:.0f} s left of --deadline {args.deadline}")
            res = Result(cfg, [*cfg.overrides, *common], status="skipped (deadline)")
        else:
            timeout = int(min(args.timeout, left - 10)) if left is not None else args.timeout
            res = run_config(cfg, common, args.steps, work, env, timeout, log)
        predict(res, args.steps)
        results.append(res)
        write_tables(results, gpu, product, torch_build, args, out_dir, stem)  # a killed run keeps what it measured
    text = write_tables(results, gpu, product, torch_build, args, out_dir, stem)
    log(f"\nwrote {out_dir / (stem + '.csv')} and .md ({time.perf_counter() - started:.0f} s for {len(matrix)} "
        f"configurations, {time.perf_counter() - T0:.0f} s in all)\n")
    log(text)
    return 0 if all(r.status == "ok" for r in results) else 1


def write_tables(results: list[Result], gpu: str, product: str | None, torch_build: str, args, out_dir: Path,
                 stem: str) -> str:
    rows = [row(r, gpu, product or "") for r in results]
    versions = next((r.metrics.get("versions") for r in results if r.metrics.get("versions")), {})
    header = (f"gpu_truth {dt.date.today().isoformat()}: {gpu}; torch {torch_build}; product {product or '-'}; "
              f"{'DRY RUN (CPU, tiny model): no timing claims' if args.dry_run else f'{args.steps} steps, first 2 warm-up'}\n"
              "versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    (out_dir / f"{stem}.csv").write_text(to_csv(rows, header))
    text = to_markdown(rows, header)
    (out_dir / f"{stem}.md").write_text(text)
    # every step's time and the counters behind each row, for what the table cannot show (warm-up, spikes)
    (out_dir / f"{stem}-metrics.json").write_text(json.dumps({r.config.name: r.metrics for r in results}, indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle", help="download/build the pinned wheels a bare GPU machine lacks")
    b.add_argument("--out", default=str(ROOT / "wheelhouse" / "gpu_truth"))
    r = sub.add_parser("run", help="run the matrix on this machine's GPU (or --dry-run on CPU)")
    r.add_argument("--bundle", default=None, help="install these wheels (--no-deps) into the work dir first")
    r.add_argument("--dry-run", action="store_true", help="CPU, tiny model, two configurations; no timing claims")
    r.add_argument("--product", default=None, help="plan for this product (default: recognised from the GPU's name)")
    r.add_argument("--steps", type=int, default=6, help="optimizer steps per configuration (2 are warm-up)")
    r.add_argument("--repeats", type=int, default=20, help="times the demo rows are repeated (packed rows need them)")
    r.add_argument("--only", default=None, help="comma-separated configuration names")
    r.add_argument("--timeout", type=int, default=240, help="seconds per configuration")
    r.add_argument("--work", default=str(ROOT / ".cache" / "gpu_truth"), help="model, data, site-packages, log")
    r.add_argument("--out", default=None, help="where the CSV/markdown go (default results/, or the work dir on --dry-run)")
    r.add_argument("--log", default=None, help="append the log here (default: the work dir's gpu_truth.log)")
    r.add_argument("--deadline", type=int, default=None, help="seconds from start after which no configuration starts")
    r.add_argument("--min-left", type=int, default=45, help="a configuration starts only with this many seconds left")
    r.add_argument("--fresh-model", action="store_true", help="draw the random weights again")
    p = sub.add_parser("report", help="a measured CSV beside the planner as it is now")
    p.add_argument("csv", nargs="?", default=str(ROOT / "results" / "gpu_truth-nvidia-h200.csv"))
    p.add_argument("--work", default=str(ROOT / ".cache" / "gpu_truth"))
    p.add_argument("--write", action="store_true", help="also write the table as the CSV's .md")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        return bundle(Path(args.out))
    return report(args) if args.command == "report" else run(args)


if __name__ == "__main__":
    sys.exit(main())
