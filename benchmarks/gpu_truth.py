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
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts (benchmarks/gputruth/), also when loaded by path

from gputruth import ROOT, SRC  # noqa: E402
from gputruth.bundle import BUNDLE, BUNDLE_LIMIT_MIB, bundle, install_bundle, lock_pins, preflight  # noqa: E402,F401
from gputruth.matrix import (COMMON, DRY_MATRIX, GPU_MATRIX, MATRICES, NEXT_MATRIX, TRACE_MATRIX, Config,  # noqa: E402,F401
                             Result, ds_variants, predict, rehearse, resolved, run_config)
from gputruth.model import demo_data, model_config, random_model, shape_only  # noqa: E402,F401
from gputruth.table import COLUMNS, ratio, read_csv, replanned, report, row, slug, to_csv, to_markdown  # noqa: E402,F401

# ---------------------------------------------------------------- the run

# The next GPU run must end within 9 minutes of device time (issue 48): no configuration starts after 520 s, and
# one that starts has --min-left seconds to finish.
MATRIX_DEADLINE_S = {"next": 520}


def device_facts(dry: bool) -> tuple[str, str]:
    """(device name, torch build) of what the configurations will run on."""
    import torch

    if dry or not torch.cuda.is_available():
        return "cpu", torch.__version__
    build = f"HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}"
    return torch.cuda.get_device_name(0), f"{torch.__version__} ({build})"


def choose_product(gpu: str, asked: str | None, recipe_arch: str) -> str | None:
    from rocmft.hardware import arches

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
    matrix = DRY_MATRIX if args.dry_run else MATRICES[args.matrix]
    if args.only:
        wanted = set(args.only.split(","))
        every = {c.name: c for c in (*GPU_MATRIX, *TRACE_MATRIX, *NEXT_MATRIX)}
        matrix = tuple(c for c in matrix if c.name in wanted) if args.dry_run else tuple(every[n] for n in every if n in wanted)
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
        from rocmft.recipe import recipes

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
        common += rows_for(device_gib())
        ds_variants(work / "ds")
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
    stem = f"gpu_truth-{slug(gpu)}" + (f"-{args.tag}" if args.tag else "")
    results: list[Result] = []
    for cfg in matrix:
        left = args.deadline - (time.perf_counter() - T0) if args.deadline else None
        if left is not None and left < args.min_left:
            log(f"\n=== {cfg.name}: skipped, {left:.0f} s left of --deadline {args.deadline}")
            res = Result(cfg, [*resolved(cfg, work), *common], status="skipped (deadline)")
        else:
            timeout = int(min(args.timeout, left - 10)) if left is not None else args.timeout
            res = run_config(cfg, common, args.steps, work, env, timeout, log)
        predict(res, args.steps)
        results.append(res)
        write_tables(results, gpu, product, torch_build, args, out_dir, stem)  # a killed run keeps what it measured
    text = write_tables(results, gpu, product, torch_build, args, out_dir, stem)
    log(f"\nwrote {out_dir / (stem + '.csv')} and .md ({time.perf_counter() - started:.0f} s for {len(matrix)} "
        f"configurations, {time.perf_counter() - T0:.0f} s in all)\n")
    rehearsed = True
    if args.dry_run:  # what a GPU run of --matrix would do, rendered and planned here (an 80 GB card: 4,096-token rows)
        gpu_common = [*COMMON, "plan.product=H100", "flash_attn=sdpa", *rows_for(80.0), f"dataset_dir={work / 'data'}",
                      f"dataset={data}"]
        rehearsed = rehearse(MATRICES[args.matrix], gpu_common, work, log)
    log(text)
    expected_fail = {"z3-granularity"}  # recorded, not required (DeepSpeed#6649 with PEFT LoRA: docs/bench.md)
    return 0 if rehearsed and all(r.status == "ok" or r.config.name in expected_fail for r in results) else 1


def device_gib() -> float:
    import torch

    return torch.cuda.get_device_properties(0).total_memory / 2**30


def rows_for(gib: float) -> list[str]:
    """Row length for the card: the 8192-token rows of the recipes need more than an 80 GB card holds under ZeRO-3's
    memory excess (docs/bench.md), so a card under 100 GiB measures 4,096-token rows."""
    return ["cutoff_len=4096"] if gib < 100 else []


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


def parse(argv: list[str] | None = None) -> argparse.Namespace:
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
    r.add_argument("--matrix", default="default", choices=sorted(MATRICES),
                   help="default: the six configurations first measured; next: issue 48's (lean ZeRO-3 and its parts, "
                        "the attention path, dropout, pure bf16, a ZeRO-3 memory snapshot)")
    r.add_argument("--tag", default="", help="added to the output files' names: results/gpu_truth-<gpu>-<tag>.csv")
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
    if args.command == "run" and args.matrix != "default" and not args.dry_run:  # its own files and time limit
        args.tag = args.tag or args.matrix
        args.deadline = args.deadline or MATRIX_DEADLINE_S.get(args.matrix)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "bundle":
        return bundle(Path(args.out))
    return report(args) if args.command == "report" else run(args)


if __name__ == "__main__":
    sys.exit(main())
