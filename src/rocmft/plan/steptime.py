"""The host's share of an optimizer step: the host floor, ZeRO-3's fetch/release hooks by fetch path, and the
all-gather of ZeRO-3's resident parameters after each step. throughput.rate() adds it to the GPU's time, and
every tokens/s the planner prints (the throughput line, each suggestion's speed-up, plan-all, README) is that rate.

Measured by benchmarks/gpu_truth.py on one NVIDIA H200 (Llama-3-8B LoRA r16 through LLaMA-Factory's Trainer,
SDPA, Liger, neat packing 1 x 8192, one process, accumulation 1; results/gpu_truth-nvidia-h200*.csv, docs/bench.md):
- HOST_S_PER_LAYER: an optimizer step takes at least this long per decoder layer, whatever its tokens: the host
  side (Python, PEFT's unfused adapters, kernel launches, the Trainer's per-step optimizer, clipping, logging and
  callbacks) runs ahead of the GPU and only shows when the GPU has little to do. 4 padded demo rows (~300 tokens,
  a few ms of GPU work) took 0.568 s a step = 32 layers x 17.8 ms (lora-padded); the packed 8192-token step
  (1.136 s) was GPU-bound. Modelled as max(GPU time of the step's micro-batches, host floor): a floor, not an extra
  cost. Which part is per micro-batch and which per optimizer step was not separated, so accumulation spreads the
  floor (the optimistic reading). Measured with LoRA; a full fine-tune has fewer modules per layer (an upper bound).
- ZERO3_HOOK_S_PER_LAYER: ZeRO-3's hooks per micro-batch, lora-neat-z3 less lora-neat on one process with every
  base weight partitioned (llama3-8b-z3 as it was: threshold 1e6), the `_no_gather_coalesced` path: 11.5 ms per
  layer in the first run (1.504 - 1.136 s), 19.5 ms in the second (1.768 - 1.144 s, the z3memory run); the range
  is those two runs.
How the hooks combine with the GPU's time depends on the fetch path (zero3.fetch_path, from DeepSpeed's source):
- one rank (measured): a device sync at every fetch, so the host cannot run ahead: added, at both ends;
- several ranks (NOT measured): no per-fetch sync, but at most 2 fetches in flight: at the fast end hidden behind
  the GPU like the rest of the host's work, at the slow end added as on one rank;
- nothing partitioned (NOT measured): nothing to fetch after the first step, no sync: the hooks are host work
  beside the GPU at both ends, max(GPU, floor + hooks). The one-rank figure, which includes its sync waits,
  bounds their host cost from above.
- the resident parameters' all-gather after each optimizer step (zero3.py: blocking, on the compute stream): its
  bytes x (N-1)/N at the link speed of throughput.link_gbps, exposed.
All of it depends on the host CPU and the launch latency (ROCm's is higher than CUDA's): measured on CUDA,
assumed for ROCm until `make gpu-truth` or `make bench` on an AMD GPU replaces it.
"""

from __future__ import annotations

from . import zero3
from .workload import Workload

HOST_S_PER_LAYER = 0.568 / 32
ZERO3_HOOK_S_PER_LAYER = ((1.504 - 1.136) / 32, (1.768 - 1.144) / 32)
# whether the hooks add to the GPU's time (fast end, slow end) on each fetch path
HOOKS_ADD = {zero3.ONE_RANK: (True, True), zero3.RANKS: (False, True), zero3.RESIDENT: (False, False)}
PATH_TEXT = {zero3.ONE_RANK: "one rank: a device sync per fetch, measured (H200)",
             zero3.RANKS: "several ranks: hidden to added, not measured",
             zero3.RESIDENT: "nothing partitioned: host work beside the GPU, not measured"}


def regather_s(w: Workload, gbps: float) -> float:
    """Seconds per optimizer step of the all-gather of ZeRO-3's resident parameters (one rank: a local copy)."""
    if w.zero_stage != 3 or w.world_size == 1 or w.offload_params:
        return 0.0
    b16 = 2 if w.precision in ("bf16", "fp16") else 4
    frozen, trainable = zero3.resident(w)
    return (frozen + trainable) * b16 * (w.world_size - 1) / w.world_size / (gbps * 1e9)


def step_seconds(w: Workload, gpu_s: tuple[float, float], gbps: float) -> tuple[float, float]:
    """(fast end, slow end) seconds of one optimizer step whose micro-batches take `gpu_s` on the GPU."""
    floor = HOST_S_PER_LAYER * w.model.num_hidden_layers
    n = max(w.grad_accum, 1)
    path = zero3.fetch_path(w) if w.zero_stage == 3 and not w.offload_params else None
    regather = regather_s(w, gbps)
    out = []
    for end, gpu in enumerate(gpu_s):
        hooks = n * ZERO3_HOOK_S_PER_LAYER[end] * w.model.num_hidden_layers if path else 0.0
        added = path is not None and HOOKS_ADD[path][end]
        out.append(max(gpu, floor + (0.0 if added else hooks)) + (hooks if added else 0.0) + regather)
    return out[0], out[1]


def shown(w: Workload, gpu_s: tuple[float, float], gbps: float) -> tuple[tuple[str, tuple[float, float]], ...]:
    """The host's terms as factors on the GPU's rate, (fast end, slow end), for the plan's factor line."""
    floor = HOST_S_PER_LAYER * w.model.num_hidden_layers
    total = step_seconds(w, gpu_s, gbps)
    parts = []
    host_bound = tuple(gpu / max(gpu, floor) for gpu in gpu_s)
    if min(host_bound) < 0.995:
        parts.append((f"host-bound: {floor:.2f} s per optimizer step at least (gpu_truth, H200)", host_bound))
    if w.zero_stage == 3 and not w.offload_params:
        path = zero3.fetch_path(w)
        rest = tuple(max(gpu, floor) / t for gpu, t in zip(gpu_s, total))
        hooks = [ZERO3_HOOK_S_PER_LAYER[e] * w.model.num_hidden_layers for e in (0, 1)]
        regather = f", resident weights re-gathered per step {regather_s(w, gbps):.2f} s" if regather_s(w, gbps) else ""
        parts.append((f"ZeRO-3 hooks {hooks[0]:.2f}-{hooks[1]:.2f} s per micro-batch ({PATH_TEXT[path]}){regather}",
                      rest))
    return tuple(parts)
