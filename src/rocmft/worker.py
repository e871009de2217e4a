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
    from .callbacks.progress import ProgressCallback

    # First, so a step the watchdog stops the run at is still reported.
    callbacks = [ProgressCallback(run_dir)]
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
    # The loss plot is drawn from our events (plot_losses), without LLaMA-Factory's warnings about eval
    # metrics a train-only run never has; `plot_loss: false` in the recipe still means no plot.
    wants_plot = train_args.get("plot_loss", True) is not False
    train_args["plot_loss"] = False
    from llamafactory.train.tuner import run_exp

    from .callbacks.watchdog import Diverged

    try:
        run_exp(args=train_args, callbacks=_callbacks(run_dir, train_args))
    except Diverged as exc:
        _plot(run_dir, train_args, wants_plot)
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
    except BaseException:
        _plot(run_dir, train_args, wants_plot)  # a run that failed after logging still gets its curve
        raise
    _plot(run_dir, train_args, wants_plot)
    return 0


def _plot(run_dir: Path, train_args: dict, wanted: bool) -> None:
    if not wanted or os.environ.get("RANK", "0") != "0":
        return
    from .callbacks.progress import plot_losses

    try:
        target = plot_losses(run_dir, train_args.get("output_dir") or run_dir / "output")
    except Exception as exc:  # noqa: BLE001 - a missing plot must not turn a finished run into a failed one
        print(f"[rocmft] warning: no loss plot: {type(exc).__name__}: {exc}", flush=True)
        return
    if target is not None:
        print(f"loss plot saved at {target}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
