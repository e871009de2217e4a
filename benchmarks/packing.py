"""Benchmark: tiny-cpu padded vs packed on the demo data, measured beside what the planner predicts.

    rocmft-heavy .venv/bin/python benchmarks/packing.py                  # padded, packing, neat_packing at cutoff 128
    rocmft-heavy .venv/bin/python benchmarks/packing.py --cutoff 1024 --micro-batch 1 --modes packing,neat_packing

Each mode is one `make bench`-style run of tiny-cpu (`rocmft bench`, RUNTIME=local, its own results CSV in a
temp folder) with `ROCMFT_METRICS_TOKENS=all`, so the measured rate counts every computed token. The padding
fraction is measured on the same data through LLaMA-Factory's own preprocessing and collator (the packed rows
it builds; for padded micro-batches, shuffled draws of the micro-batch size, as the trainer's sampler makes):
real tokens/s = computed tokens/s x (1 - padding). Beside each: the planner's padding fraction and its
predicted speed relative to the first mode (`rocmft.plan.throughput.relative_speed`; the cpu arch has no peak,
so the planner predicts ratios, not absolute rates), and the measured ratio. Target: predicted/measured
ratio within 25%. Peak RSS per mode (the bench's memory column) answers the SDPA packing vs neat_packing
question at a recipe's length. Nothing here asserts a time: it prints.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODE_SET = {"padded": "neat_packing=false packing=false", "packing": "neat_packing=false packing=true",
            "neat_packing": "neat_packing=true"}


def measured_padding(mode: str, cutoff: int, micro_batch: int, draws: int = 400) -> float:
    """Padding share of computed tokens, from LLaMA-Factory's own processing of tiny-cpu's datasets."""
    from llamafactory.data import (
        SFTDataCollatorWith4DAttentionMask,
        get_template_and_fix_tokenizer,
    )
    from llamafactory.data.loader import _get_merged_dataset, _get_preprocessed_dataset
    from llamafactory.extras.constants import IGNORE_INDEX
    from llamafactory.hparams import get_train_args

    from rocmft.recipe import recipes

    lf = dict(recipes.load("tiny-cpu").llamafactory)
    lf.update(cutoff_len=cutoff, per_device_train_batch_size=micro_batch, neat_packing=mode == "neat_packing",
              packing=mode != "padded", output_dir=tempfile.mkdtemp(), overwrite_cache=True,
              model_name_or_path=str(ROOT / lf["model_name_or_path"]), dataset_dir=str(ROOT / "data"))
    model_args, data_args, training_args, *_ = get_train_args(lf)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    merged = _get_merged_dataset(data_args.dataset, model_args, data_args, training_args, "sft")
    rows = _get_preprocessed_dataset(merged, data_args, training_args, "sft", template, tokenizer, None, is_eval=False)
    rows = [dict(r) for r in rows]
    if mode != "padded":  # every packed row is cutoff_len long, its padded tail at position id 0 (supervised.py)
        pad = 0
        for r in rows:
            pos = r["position_ids"]
            tail = len(pos) - len(list(itertools.dropwhile(lambda p: p == 0, reversed(pos))))
            pad += tail if tail > 1 else 0
        return pad / sum(len(r["input_ids"]) for r in rows)
    collator = SFTDataCollatorWith4DAttentionMask(template=template, tokenizer=tokenizer, pad_to_multiple_of=8,
                                                  label_pad_token_id=IGNORE_INDEX)
    rng = random.Random(0)
    real = computed = 0
    for _ in range(draws):
        batch = collator([{k: r[k] for k in ("input_ids", "attention_mask", "labels")}
                          for r in rng.sample(rows, micro_batch)])
        real += int(batch["attention_mask"].sum())
        computed += batch["input_ids"].numel()
    return 1 - real / computed


def bench(mode: str, cutoff: int, micro_batch: int, steps: int, work: Path) -> dict:
    results = work / f"{mode}.csv"
    env = {**os.environ, "ROCMFT_METRICS_TOKENS": "all", "ROCMFT_RUNS": str(work / "runs"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    sets = f"{MODE_SET[mode]} cutoff_len={cutoff} per_device_train_batch_size={micro_batch}"
    cmd = [sys.executable, "-m", "rocmft.cli.main", "bench", "tiny-cpu", "--runtime", "local", "--steps", str(steps),
           "--results", str(results), "--set", sets]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{mode}: bench failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    with results.open() as handle:
        return list(csv.DictReader(handle))[-1]


def predicted(modes: list[str], cutoff: int, micro_batch: int) -> dict[str, tuple[float, float]]:
    """(padding fraction, speed relative to the first mode) as the planner models them."""
    from rocmft import plan
    from rocmft.plan import throughput
    from rocmft.recipe import recipes

    out, first = {}, None
    for mode in modes:
        sets = MODE_SET[mode].split() + [f"cutoff_len={cutoff}", f"per_device_train_batch_size={micro_batch}"]
        w = plan.check(recipes.load("tiny-cpu", sets)).workload
        first = first or w
        out[mode] = (throughput.batches(w).padding, throughput.relative_speed(w, first))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="padded,packing,neat_packing")
    parser.add_argument("--cutoff", type=int, default=128)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    modes = args.modes.split(",")
    plan = predicted(modes, args.cutoff, args.micro_batch)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            row = bench(mode, args.cutoff, args.micro_batch, args.steps, Path(tmp))
            pad = measured_padding(mode, args.cutoff, args.micro_batch)
            computed = float(row["tokens_per_s_per_gpu"])
            rows[mode] = (computed * (1 - pad), pad, float(row.get("peak_mem_gib") or 0))
    base = rows[modes[0]][0]
    print(f"tiny-cpu on demo_alpaca,demo_messages, cutoff_len {args.cutoff}, micro-batch {args.micro_batch}, "
          f"{args.steps} steps (first 2 warmup)")
    print(f"{'mode':<14}{'real tok/s':>11}{'padding':>9}{'planner pad':>12}{'measured x':>11}{'planner x':>10}"
          f"{'planner/measured':>17}{'peak RSS GiB':>13}")
    for mode in modes:
        real, pad, rss = rows[mode]
        ppad, pratio = plan[mode]
        ratio = real / base
        print(f"{mode:<14}{real:>11.0f}{pad:>9.1%}{ppad:>12.1%}{ratio:>11.2f}{pratio:>10.2f}{pratio / ratio:>17.2f}"
              f"{rss:>13.2f}")
    print(json.dumps({m: {"real_tokens_per_s": rows[m][0], "padding": rows[m][1], "planner_padding": plan[m][0],
                          "planner_ratio": plan[m][1], "measured_ratio": rows[m][0] / base} for m in modes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
