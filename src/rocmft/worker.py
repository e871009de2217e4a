"""What runs in each training process: LLaMA-Factory's run_exp on the run's train.yaml, plus our callbacks.

Kept small on purpose: everything decidable before launch was decided on the host. The exit code is the
launcher's signal: 0 done, 3 diverged (diverged.json written), 75 stopped by a signal after saving a
checkpoint (callbacks/stop.py; EX_TEMPFAIL of sysexits.h: try again later), anything else a failure.

A run whose output/ already holds checkpoints of its own is being started again (torchrun restarted its
ranks, Slurm requeued it): it resumes from its newest COMPLETE checkpoint (rocmft.run.checkpoints). Incomplete
ones are renamed checkpoint-N.incomplete with a warning, so that neither LLaMA-Factory (which resumes
from the highest number, complete or not) nor a later listing takes them.

May import: io, recipe, run, callbacks.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from .run.jobfiles import DIVERGED, job_file

EXIT_DIVERGED = 3
EXIT_STOPPED = 75


def _callbacks(run_dir: Path, train_args: dict) -> list:
    from .callbacks.progress import ProgressCallback
    from .callbacks.stop import StopOnSignalCallback
    from .recipe import stages

    # First, so a step the watchdog stops the run at is still reported.
    callbacks = [ProgressCallback(run_dir, tokens="all" if train_args.get("neat_packing") else "non_padding",
                                  stage=stages.name(train_args))]
    recipe_file = run_dir / "recipe.resolved.yaml"
    recipe = yaml.safe_load(recipe_file.read_text()) if recipe_file.is_file() else {}
    watchdog = recipe.get("watchdog", False)
    if watchdog is not False:
        from .callbacks.watchdog import Objective, WatchdogCallback

        context = {"precision": "bf16" if train_args.get("bf16") else "fp16" if train_args.get("fp16") else "fp32",
                   "arch": recipe.get("arch"), "recipe_learning_rate": train_args.get("learning_rate")}
        callbacks.append(WatchdogCallback(watchdog if isinstance(watchdog, dict) else {}, run_dir, context,
                                          Objective.from_args(train_args)))
    callbacks.append(StopOnSignalCallback(run_dir))
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
    rank0 = os.environ.get("RANK", "0") == "0"
    if job_file(run_dir, DIVERGED).is_file():  # torchrun restarted the ranks of a diverged run
        if rank0:
            print("[rocmft] this run diverged (diverged.json): not training again from its checkpoints", flush=True)
        return EXIT_DIVERGED
    _resume_in_place(train_args, rank0)
    _load_cpu_indexed_storage()
    # tuner before patcher: with llamafactory.model imported first, trl's DPO trainer (DPO, ORPO, SimPO) failed to
    # import (trl.mergekit_utils: `No module named 'mergekit'`; tests/train/test_stages_cpu.py)
    from llamafactory.train.tuner import run_exp
    from llamafactory.model import patcher

    patcher.configure_attn_implementation = gpt_oss_eager(patcher.configure_attn_implementation)

    from .callbacks.stop import Stopped
    from .callbacks.watchdog import Diverged

    try:
        run_exp(args=train_args, callbacks=_callbacks(run_dir, train_args))
    except Diverged as exc:
        _plot(run_dir, train_args, wants_plot)
        if rank0:
            print(f"[rocmft] watchdog stopped the run: {exc.cause} (details: {job_file(run_dir, DIVERGED)})", flush=True)
        _leave_group()
        return EXIT_DIVERGED
    except Stopped:
        _plot(run_dir, train_args, wants_plot)
        _leave_group()
        return EXIT_STOPPED
    except BaseException:
        _plot(run_dir, train_args, wants_plot)  # a run that failed after logging still gets its curve
        raise
    _plot(run_dir, train_args, wants_plot)
    return 0


def _resume_in_place(train_args: dict, rank0: bool) -> None:
    from .run import checkpoints

    found, skipped = checkpoints.newest_complete(Path(train_args["output_dir"]))
    for item in skipped:
        aside = checkpoints.set_aside(item.path)  # every rank tries; the first rename wins
        if rank0:
            kept = f", kept as {aside.name}" if aside else ""
            print(f"[rocmft] warning: {item.line()}{kept}", flush=True)
    if found is not None:
        train_args["resume_from_checkpoint"] = str(found)
        if rank0:
            print(f"[rocmft] resuming this run from its {found.name}", flush=True)


def gpt_oss_eager(configure):
    """LLaMA-Factory 0.9.5's attention setup for a gpt-oss model (model_utils/attention.py) registers a CUDA
    FlashAttention-3 kernel from the Hub (kernels-community/vllm-flash-attn3) through
    transformers.integrations.hub_kernels.load_and_register_kernel, which transformers 5.6 does not have: the model
    never loads (ImportError), and on ROCm that kernel could not run anyway. gpt-oss has no SDPA path
    (GptOssPreTrainedModel._supports_sdpa = False) and its per-head attention sinks are computed by transformers'
    eager attention (modeling_gpt_oss.eager_attention_forward): that is what it gets here. Other models: unchanged."""
    def configure_attn_implementation(config, model_args) -> None:
        if getattr(config, "model_type", None) != "gpt_oss":
            return configure(config, model_args)
        from llamafactory.extras.constants import AttentionFunction

        model_args.flash_attn = AttentionFunction.DISABLED
        config._attn_implementation = "eager"
        return None

    return configure_attn_implementation


def _load_cpu_indexed_storage() -> None:
    """Resuming a multi-process CPU run: the Trainer loads optimizer.pt with map_location=args.device, which is
    `cpu:0` there (transformers Trainer._load_optimizer_and_scheduler), and torch's default_restore_location
    knows only `cpu`: "don't know how to restore data location ... (tagged with cpu:0)". Teach it `cpu:<N>`
    through torch's public registry, after every built-in (GPU runs never reach it)."""
    import torch.serialization

    def tag(_storage):
        return None

    def restore(storage, location: str):
        return storage if str(location).startswith("cpu:") else None

    torch.serialization.register_package(99, tag, restore)


def _leave_group() -> None:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - leaving quietly; the exit code says how the run ended
        pass


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


def _exit(code: int) -> None:
    """A rank of a multi-process run leaves without interpreter finalization once all is written and flushed.
    At finalization, C++ objects of torch.distributed's gloo backend (its worker threads) are destroyed, and
    that can abort a rank whose run had finished (CI, once: "terminate called without an active exception",
    SIGABRT, after the last step and the eval; pytorch/pytorch#179291 describes gloo threads crashing
    finalization). LLaMA-Factory has destroyed the process group by then; nothing of ours runs at exit."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(code)
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
