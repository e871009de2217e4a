"""What the GPU memory held at its peak during training, by the code that allocated it (ROCMFT_MEMORY_TRACE=1, GPU
only; the metrics callback turns it on at train begin and writes the breakdown into metrics.json).

Why: the hardware run measured ZeRO-3 LoRA on one process 30 GiB above the same LoRA without DeepSpeed, with the
same weights at train begin (results/gpu_truth-nvidia-h200-z3memory.*). torch's allocator history
(torch.cuda.memory._record_memory_history, "Understanding CUDA Memory Usage" in PyTorch's docs) records every
allocation and free with its Python stack; replaying it finds the moment of the peak and what was alive then.
Allocations made before recording began (the weights, the optimizer) are not in it: they are
`at_train_begin_gib`. Cost while on: a stack walk per allocation (slower steps) and the history's host memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GIB = 1024 ** 3
MAX_ENTRIES = 500_000  # allocator events kept (a ring): a few steps of an 8B model's training
# The libraries whose innermost frame names an allocation ("who asked", not torch's internals).
OWNERS = ("deepspeed", "liger_kernel", "peft", "transformers", "accelerate", "llamafactory", "rocmft")


def owner(frames: list[Mapping[str, Any]] | None) -> str:
    """The innermost frame (torch lists them innermost first) inside one of OWNERS: the code that made the
    tensor, not a wrapper around the whole forward (DeepSpeed's engine.forward, Liger's lce_forward hold every
    activation). Without one, the innermost frame outside torch; else torch's own."""
    frames = frames or []
    for frame in frames:
        path = str(frame.get("filename", ""))
        for library in OWNERS:
            if f"/{library}/" in path:
                return f"{library}/{path.split(f'/{library}/', 1)[1]}:{frame.get('name', '?')}"
    for frame in frames:
        path = str(frame.get("filename", ""))
        if "/torch/" not in path and path:
            return f"{path.rsplit('/', 1)[-1]}:{frame.get('name', '?')}"
    return "torch (no caller recorded)"


def peak_breakdown(snapshot: Mapping[str, Any], device: int = 0, top: int = 15) -> dict[str, Any]:
    """Replay the device's allocator trace: the highest sum of live allocations and, at that moment, the live
    bytes grouped by `owner`, largest first."""
    traces = snapshot.get("device_traces") or []
    events = traces[device] if device < len(traces) else []
    live: dict[int, tuple[int, str]] = {}
    current = peak = 0
    at_peak: dict[int, tuple[int, str]] = {}
    for event in events:
        action, addr, size = event.get("action"), event.get("addr"), int(event.get("size") or 0)
        if action == "alloc":
            live[addr] = (size, owner(event.get("frames")))
            current += size
            if current > peak:
                peak, at_peak = current, dict(live)
        elif action == "free_completed" and addr in live:
            current -= live.pop(addr)[0]
    groups: dict[str, list[float]] = {}
    for size, who in at_peak.values():
        entry = groups.setdefault(who, [0.0, 0])
        entry[0] += size / GIB
        entry[1] += 1
    ranked = sorted(groups.items(), key=lambda item: -item[1][0])
    return {"traced_peak_gib": peak / GIB, "events": len(events),
            "at_peak": [{"where": who, "gib": round(gib, 3), "blocks": int(n)} for who, (gib, n) in ranked[:top]],
            "other_gib": round(sum(g for _, (g, _) in ranked[top:]), 3)}


def start() -> None:
    import torch

    torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)


def stop_and_summarize() -> dict[str, Any]:
    import torch

    try:
        return peak_breakdown(torch.cuda.memory._snapshot(), torch.cuda.current_device())
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
