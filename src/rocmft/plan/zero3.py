"""What ZeRO-3 keeps whole, what it gathers, and which fetch path a run takes (DeepSpeed 0.19.8, read in its source).

- `stage3_param_persistence_threshold`: a parameter with `ds_numel <= threshold` is never partitioned during
  forward and backward (runtime/zero/parameter_offload.py `mark_persistent_parameters`; "auto" is 10 x hidden_size,
  transformers integrations/deepspeed.py). Such a parameter is still released at every optimizer step and gathered
  again after it (stage3.py `step` -> `_partition_all_parameters`, `_post_step`: "Gathering persisting parameters",
  a blocking all-gather, one per parameter, partition_parameters.py `_allgather_params_coalesced`): one gather of
  the resident parameters per optimizer step instead of two of every parameter per micro-batch.
- `memory_efficient_linear` (default true, runtime/zero/config.py): under `zero.Init` DeepSpeed replaces
  `torch.nn.functional.linear` with `zero3_linear_wrap` for the whole process (partition_parameters.py
  `_enable_mem_efficient_linear`), whose `LinearFunctionForZeroStage3` saves its input for backward even when the
  weight is frozen (zero/linear.py `setup_context`): LoRA's frozen base projections keep their inputs
  (activations.zero3_linear_bytes, measured on CPU).
- The fetch path: with one rank `all_gather_coalesced` returns `_no_gather_coalesced`, whose handle synchronises
  the device at every fetch of a partitioned parameter (`NoGatherHandle.wait`: `current_stream().synchronize()`
  where `resolves_data_dependency()` is false, CUDA and ROCm); with more ranks no such sync, but the coordinator
  keeps at most 2 fetch events in flight and waits on the oldest (partitioned_param_coordinator.py
  `__max_ongoing_fetch_events`); with nothing partitioned nothing is fetched after the first step, and the hooks
  do only host-side bookkeeping (`fetch_sub_module` with `fetch_numel == 0`: no handle, no event, no sync).
"""

from __future__ import annotations

from .workload import Workload

# Fetch paths (steptime.py times each).
RESIDENT = "resident"  # nothing partitioned: hooks run on the host beside the GPU
ONE_RANK = "one rank"  # _no_gather_coalesced: a device sync at every fetch
RANKS = "ranks"  # all-gathers, at most 2 fetch events in flight


def threshold(w: Workload) -> float:
    return w.ds_persistence if w.ds_persistence is not None else 10 * w.model.hidden_size


def parameters(w: Workload) -> list[tuple[int, bool]]:
    """(elements, trainable) of every parameter tensor as DeepSpeed sees it. A quantised linear's weight is its
    packed storage in the compute dtype (LLaMA-Factory's bnb_4bit_quant_storage): a quarter of its values at 4 bits."""
    m = w.model
    shapes = m.linear_shapes()
    quant = bool(w.quant_bits) and w.method == "lora"
    per_value = (w.quant_bits or 16) / 16 if quant else 1.0
    out: list[tuple[int, bool]] = []
    trains_layer = _layer_trains(w)
    for layer in range(m.num_hidden_layers):
        full = trains_layer(layer)
        for name, (a, b) in shapes.items():
            out.append((max(int(a * b * per_value), 1), full))
            if w.method == "lora" and name in w.lora_targets:
                out += [(w.lora_rank * a, True), (w.lora_rank * b, True)]
        if m.attention_bias:
            out += [(m.q_dim, full), (m.kv_dim, full), (m.kv_dim, full)]
        out += [(m.hidden_size, full)] * 2
        if m.layer_norm_params > 2 * m.hidden_size:  # Qwen3's q_norm/k_norm
            out += [(m.head_dim, full)] * 2
    embed_trains = w.method == "full" or "embed_tokens" in w.extra_trainable
    out.append((m.embed_params, embed_trains))
    if m.head_params:
        out.append((m.head_params, w.method == "full" or "lm_head" in w.extra_trainable))
    out.append((m.hidden_size, w.method == "full"))
    return out


def _layer_trains(w: Workload):
    if w.method == "full":
        return lambda layer: True
    if w.method == "freeze":
        k, n = abs(w.freeze_layers), w.model.num_hidden_layers
        return (lambda layer: layer >= n - k) if w.freeze_layers > 0 else (lambda layer: layer < k)
    return lambda layer: False


def resident(w: Workload) -> tuple[int, int]:
    """(frozen, trainable) elements kept whole on every GPU: under the persistence threshold."""
    limit = threshold(w)
    frozen = sum(n for n, trains in parameters(w) if n <= limit and not trains)
    trainable = sum(n for n, trains in parameters(w) if n <= limit and trains)
    return frozen, trainable


def partitioned(w: Workload) -> int:
    """Elements gathered for each forward and backward (what the threshold does not keep whole)."""
    limit = threshold(w)
    return sum(n for n, _ in parameters(w) if n > limit)


def largest(w: Workload) -> int:
    return max(n for n, _ in parameters(w))


def fetch_path(w: Workload) -> str:
    if partitioned(w) == 0:
        return RESIDENT
    return ONE_RANK if w.world_size == 1 else RANKS


def linear_swap(w: Workload) -> bool:
    """DeepSpeed's `LinearFunctionForZeroStage3` replaces every `F.linear` of the process (bitsandbytes' quantised
    linears do not call it)."""
    return w.zero_stage == 3 and w.ds_mem_efficient_linear and not (w.quant_bits and w.method == "lora")
