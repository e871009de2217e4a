"""Measures a run from inside every training process and leaves `<run dir>/metrics.json` (what `make bench` reads).

Registered by rocmft.worker only when ROCMFT_METRICS is set, so ordinary training never imports it.

What is measured, and how:
- Step time: the wall-clock period of each optimizer step, from the end of the previous step to the end of
  this one (the first step: from its on_step_begin). That period holds everything one step costs: fetching
  the micro-batches, forward/backward, the optimizer, logging. On a GPU the callback synchronizes the device
  at each step boundary, so queued kernels are counted in the step that launched them. The compute part
  alone (on_step_begin -> on_step_end) is kept too, as `compute_s`.
- Warmup: the first WARMUP_STEPS (2; fewer when the run is shorter, always leaving one measured step) are
  left out of every rate and percentile: they hold allocator growth, kernel selection and the first
  ZeRO-3 gathers, which later steps do not pay.
- Tokens: the Trainer's own count, `state.num_input_tokens_seen`, which this callback switches on at
  on_train_begin (`args.include_num_input_tokens_seen = "non_padding"`, or ROCMFT_METRICS_TOKENS=all): the
  attention-mask sum of every micro-batch, gathered over all ranks by the Trainer. Padding is excluded;
  prompt tokens are included (they cost the same FLOPs). It is set here rather than in train.yaml because
  transformers' command-line parser (and so rocmft's validation, which uses it) only takes true/false for
  that field, while the Trainer itself takes "non_padding". With `neat_packing` the attention mask holds
  segment ids (or a 4-D float mask), so the bench asks for "all" there: a packed run's rate then counts its
  padding too (about 8% of tiny-cpu's packed positions; `benchmarks/packing.py` measures it per recipe).
- Real tokens: what the collator was handed, counted before it pads or packs the batch: the non-zero
  attention-mask entries of every feature (neat_packing's segment ids included, its pack padding not), so
  a packed run's real tokens are known although its collated mask is not a 0/1 mask. Counted on this rank
  in the main process (a DataLoader with worker processes collates elsewhere: then not counted), summed
  over ranks at the end: `real_tokens_per_s`, `real_tokens_per_s_per_gpu`. accelerate fetches one batch
  ahead, so each step's count is its next micro-batch's: the same rows over a measured window of steps.
- Peak memory: torch.cuda.max_memory_allocated / max_memory_reserved on a GPU (HIP on ROCm), the peak RSS
  of the process (getrusage) on CPU; the maximum over ranks (an all_reduce MAX when torch.distributed
  is initialized).
- What ran: the device name and count, and the versions of the stack as the training process sees them
  (inside the container on RUNTIME=docker, which is what a bench row must record).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..run.jobfiles import METRICS, job_file

WARMUP_STEPS = 2
TOKEN_MODES = ("non_padding", "all")
SCHEMA = 1
GIB = 1024 ** 3


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    data = sorted(float(v) for v in values)
    if not data:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def warmup_for(max_steps: int, wanted: int = WARMUP_STEPS) -> int:
    """Steps left out at the start: `wanted`, but always at least one measured step."""
    if max_steps <= 0:
        return wanted
    return max(0, min(wanted, max_steps - 1))


def feature_tokens(features: Sequence[Mapping[str, Any]]) -> int:
    """Real tokens in a list of collator features: non-zero entries of every `*attention_mask` list (pairwise
    and KTO features carry several), else the length of every `*input_ids` list."""
    total = 0
    for feature in features:
        masks = [v for k, v in feature.items() if k.endswith("attention_mask") and v is not None]
        if masks:
            total += sum(sum(1 for x in mask if x) for mask in masks)
        else:
            total += sum(len(v) for k, v in feature.items() if k.endswith("input_ids") and v is not None)
    return total


def summarize(steps: list[dict[str, float]], warmup: int, world_size: int, tokens_at_begin: int = 0) -> dict[str, Any]:
    """Rates and percentiles over the steps after warmup.

    `steps`: one dict per optimizer step, in order, with `period_s` (end of previous step -> end of this
    one), `compute_s` and `tokens_seen` (the Trainer's cumulative, all-rank count after this step);
    `tokens_at_begin`: that count when training began (non-zero on a resumed run).
    """
    measured = steps[warmup:]
    out: dict[str, Any] = {"warmup_steps": min(warmup, len(steps)), "measured_steps": len(measured)}
    if not measured:
        return out
    periods = [s["period_s"] for s in measured]
    out["step_time_p50_s"] = percentile(periods, 50)
    out["step_time_p90_s"] = percentile(periods, 90)
    out["step_time_mean_s"] = sum(periods) / len(periods)
    out["compute_time_p50_s"] = percentile([s["compute_s"] for s in measured], 50)
    before = steps[warmup - 1]["tokens_seen"] if warmup > 0 else tokens_at_begin
    tokens = measured[-1]["tokens_seen"] - before
    elapsed = sum(periods)
    out["measured_tokens"] = int(tokens)
    out["measured_time_s"] = elapsed
    if tokens > 0 and elapsed > 0:
        out["tokens_per_s"] = tokens / elapsed
        out["tokens_per_s_per_gpu"] = tokens / elapsed / max(1, world_size)
    return out


def real_rate(steps: list[dict[str, float]], warmup: int, world_size: int, real_total: float | None) -> dict[str, Any]:
    """Real tokens/s over the measured steps; `real_total`: the window's real tokens summed over ranks."""
    measured = steps[warmup:]
    elapsed = sum(s["period_s"] for s in measured)
    if not measured or not real_total or elapsed <= 0:
        return {}
    return {"measured_real_tokens": int(real_total), "real_tokens_per_s": real_total / elapsed,
            "real_tokens_per_s_per_gpu": real_total / elapsed / max(1, world_size)}


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {"python": ".".join(map(str, sys.version_info[:3]))}
    for dist in ("torch", "llamafactory", "transformers", "deepspeed", "peft", "accelerate"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        import torch

        if getattr(torch.version, "hip", None):
            found["rocm"] = str(torch.version.hip)  # the HIP runtime torch was built against
    except ImportError:
        pass
    rocm_file = Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version"
    if rocm_file.is_file():
        found["rocm_installed"] = rocm_file.read_text().strip()
    return found



def cuda_in_use() -> bool:
    """True when this process trains on a GPU (HIP on ROCm); checked once training has begun."""
    try:
        import torch

        return torch.cuda.is_available() and torch.cuda.is_initialized()
    except (ImportError, RuntimeError):
        return False


def local_peaks(cuda: bool) -> tuple[float, float, float]:
    """(allocated, reserved, rss) peaks of this process in bytes; GPU ones are 0 on CPU."""
    import resource

    rss = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux
    if not cuda:
        return 0.0, 0.0, rss
    import torch

    return float(torch.cuda.max_memory_allocated()), float(torch.cuda.max_memory_reserved()), rss


def parameter_storage(model) -> dict[str, dict[str, float]]:
    """GiB the model's parameters hold on this rank, by dtype, frozen and trainable. Under ZeRO-3 a parameter's
    data is an empty placeholder and its shard lives in `ds_tensor`: that is what is counted. Why: the hardware
    run found ZeRO-3 LoRA 37% above plan with no breakdown (results/gpu_truth-nvidia-h200.csv); weights kept in
    fp32 instead of bf16 would be 16 GiB of it on an 8B model, and this tells at once."""
    out: dict[str, dict[str, float]] = {}
    for param in getattr(model, "parameters", list)():
        held = getattr(param, "ds_tensor", None)
        held = param if held is None else held
        side = out.setdefault(str(held.dtype).replace("torch.", ""), {"trainable_gib": 0.0, "frozen_gib": 0.0})
        side["trainable_gib" if param.requires_grad else "frozen_gib"] += held.numel() * held.element_size() / GIB
    return out


def over_ranks(values: list[float], op: str = "max") -> tuple[list[float], str]:
    """Each value's maximum (or sum) over all ranks (every rank must call this: it is a collective), and what it
    covers."""
    try:
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return values, "this process"
        device = "cpu"
        if dist.get_backend() == "nccl" and torch.cuda.is_available():
            device = f"cuda:{torch.cuda.current_device()}"
        tensor = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return [float(v) for v in tensor.cpu().tolist()], f"{op} over {dist.get_world_size()} ranks"
    except Exception as exc:  # noqa: BLE001 - a failed collective must not fail the run; the record says what it holds
        return values, f"rank 0 only ({type(exc).__name__}: {exc})"


def max_over_ranks(values: list[float]) -> tuple[list[float], str]:
    return over_ranks(values, "max")


class MetricsCallback(TrainerCallback):
    def __init__(self, run_dir: Path | str, warmup_steps: int | None = None):
        self.run_dir = Path(run_dir)
        env_warmup = os.environ.get("ROCMFT_METRICS_WARMUP")
        self.wanted_warmup = warmup_steps if warmup_steps is not None else int(env_warmup) if env_warmup else WARMUP_STEPS
        self.steps: list[dict[str, float]] = []
        self._begin: float | None = None
        self._last_end: float | None = None
        self._train_begin: float | None = None
        self._cuda = False
        self._tokens_at_begin = 0
        self._real_tokens = 0  # features handed to the collator on this rank
        self._real_counted = False
        self._at_begin: dict[str, Any] = {}  # GPU memory when training begins: weights + optimizer, no activations
        self._tracing = False  # ROCMFT_MEMORY_TRACE=1: the allocator's history, for memory_trace.peak_breakdown
        self.tokens_mode = os.environ.get("ROCMFT_METRICS_TOKENS", "non_padding")
        if self.tokens_mode not in TOKEN_MODES:
            raise ValueError(f"ROCMFT_METRICS_TOKENS={self.tokens_mode!r}: one of {', '.join(TOKEN_MODES)}")

    # ------------------------------------------------------------ device helpers
    def _sync(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.synchronize()

    def _local_memory(self) -> tuple[float, float, float]:
        return local_peaks(self._cuda)

    def _max_over_ranks(self, values: list[float]) -> tuple[list[float], str]:
        return max_over_ranks(values)

    # ------------------------------------------------------------ Trainer events
    def on_train_begin(self, args, state, control, **kwargs):
        args.include_num_input_tokens_seen = self.tokens_mode  # read by the Trainer at every micro-batch
        self._tokens_at_begin = int(state.num_input_tokens_seen or 0)
        self._cuda = cuda_in_use()
        self._count_real_tokens(kwargs.get("train_dataloader"))
        if self._cuda:
            import torch

            self._at_begin = {"at_train_begin_gib": torch.cuda.memory_allocated() / GIB,
                              "parameters": parameter_storage(kwargs.get("model"))}
            if os.environ.get("ROCMFT_MEMORY_TRACE") == "1":
                from . import memory_trace

                memory_trace.start()
                self._tracing = True
        self._sync()
        self._train_begin = time.perf_counter()

    def _count_real_tokens(self, loader) -> None:
        # The DataLoader reads collate_fn when an epoch's iterator is made, after on_train_begin. accelerate's
        # DataLoaderShard wraps the torch DataLoader that iterates (`base_dataloader`): the collate_fn is its.
        loader = getattr(loader, "base_dataloader", loader)
        collate = getattr(loader, "collate_fn", None)
        if collate is None or getattr(loader, "num_workers", 0):
            return

        def counting(features):
            self._real_tokens += feature_tokens(features)
            return collate(features)

        loader.collate_fn = counting
        self._real_counted = True

    def on_step_begin(self, args, state, control, **kwargs):
        self._sync()
        self._begin = time.perf_counter()
        if self._last_end is None:
            self._last_end = self._begin

    def on_step_end(self, args, state, control, **kwargs):
        self._sync()
        now = time.perf_counter()
        begin = self._begin if self._begin is not None else now
        start = self._last_end if self._last_end is not None else begin
        self.steps.append({"step": state.global_step, "period_s": now - start, "compute_s": now - begin,
                           "tokens_seen": int(state.num_input_tokens_seen or 0), "real_tokens": self._real_tokens})
        self._last_end = now
        self._begin = None

    def on_train_end(self, args, state, control, **kwargs):
        trace = None
        if self._tracing:
            from . import memory_trace

            trace = memory_trace.stop_and_summarize()
            self._tracing = False
        allocated, reserved, rss = self._local_memory()
        (allocated, reserved, rss), scope = self._max_over_ranks([allocated, reserved, rss])
        warmup = warmup_for(int(state.max_steps or 0), self.wanted_warmup)
        real = self._real_window(warmup)
        if not state.is_world_process_zero:
            return
        world = int(getattr(args, "world_size", 1) or 1)
        mode = str(getattr(args, "include_num_input_tokens_seen", "no"))
        data: dict[str, Any] = {
            "schema": SCHEMA,
            "written": time.time(),
            "host": socket.gethostname(),
            "world_size": world,
            "device": self._device(),
            "device_count": world,
            "versions": _versions(),
            "max_steps": int(state.max_steps or 0),
            "global_step": int(state.global_step),
            "micro_batch": int(args.per_device_train_batch_size),
            "grad_accum": int(args.gradient_accumulation_steps),
            "tokens_mode": mode,
            "tokens_seen": int(state.num_input_tokens_seen or 0),
            "train_time_s": (time.perf_counter() - self._train_begin) if self._train_begin else None,
            "peak_memory": {
                "kind": "gpu" if self._cuda else "rss",
                "allocated_gib": allocated / GIB if self._cuda else None,
                "reserved_gib": reserved / GIB if self._cuda else None,
                "rss_gib": rss / GIB,
                "scope": scope,
                **self._at_begin,  # rank 0's
            },
            **({"memory_trace": trace} if trace is not None else {}),  # rank 0's
            "steps": self.steps,
            **summarize(self.steps, warmup, world, self._tokens_at_begin),
            **real_rate(self.steps, warmup, world, real),
        }
        target = job_file(self.run_dir, METRICS)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{METRICS}.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, target)

    def _real_window(self, warmup: int) -> float | None:
        """Real tokens of the measured steps, summed over ranks (a collective: every rank calls it)."""
        if not self._real_counted or len(self.steps) <= warmup:
            return None
        before = self.steps[warmup - 1]["real_tokens"] if warmup > 0 else 0
        local = float(self.steps[-1]["real_tokens"] - before)
        (total,), scope = over_ranks([local], "sum")
        return None if scope.startswith("rank 0 only") else total

    def _device(self) -> str:
        if self._cuda:
            try:
                import torch

                return torch.cuda.get_device_name(torch.cuda.current_device())
            except (RuntimeError, AssertionError):
                return "gpu"
        return "cpu"
