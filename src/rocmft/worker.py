"""What runs in each training process: LLaMA-Factory's run_exp on the run's train.yaml, plus our callbacks.

Kept small on purpose: everything decidable before launch was decided on the host. The exit code is the
launcher's signal: 0 done, 3 diverged (diverged.json written), anything else a failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

EXIT_DIVERGED = 3


def _callbacks(run_dir: Path, train_args: dict) -> list:
    callbacks = []
    recipe_file = run_dir / "recipe.resolved.yaml"
    recipe = yaml.safe_load(recipe_file.read_text()) if recipe_file.is_file() else {}
    watchdog = recipe.get("watchdog", False)
    if watchdog is not False:
        from .callbacks.watchdog import WatchdogCallback

        context = {"precision": "bf16" if train_args.get("bf16") else "fp16" if train_args.get("fp16") else "fp32",
                   "arch": recipe.get("arch"), "recipe_learning_rate": train_args.get("learning_rate")}
        callbacks.append(WatchdogCallback(watchdog if isinstance(watchdog, dict) else {}, run_dir, context))
    if train_args.get("resume_from_checkpoint"):
        from .callbacks.resume_lr import ResumeLearningRateCallback

        callbacks.append(ResumeLearningRateCallback())
    if os.environ.get("ROCMFT_METRICS"):
        from .callbacks.metrics import MetricsCallback

        callbacks.append(MetricsCallback(run_dir))
    return callbacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.worker")
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    from omegaconf import OmegaConf  # how llamafactory-cli reads the YAML, so both read it the same way

    train_args = OmegaConf.to_container(OmegaConf.load(run_dir / "train.yaml"))
    from llamafactory.train.tuner import run_exp

    from .callbacks.watchdog import Diverged

    try:
        run_exp(args=train_args, callbacks=_callbacks(run_dir, train_args))
    except Diverged as exc:
        rank = os.environ.get("RANK", "0")
        if rank == "0":
            print(f"[rocmft] watchdog stopped the run: {exc.cause} (details: {run_dir}/diverged.json)", flush=True)
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
        return EXIT_DIVERGED
    return 0


if __name__ == "__main__":
    sys.exit(main())
