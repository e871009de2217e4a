"""callbacks/memory_trace.peak_breakdown on allocator histories written by hand in the shape
torch.cuda.memory._snapshot() returns (this machine has no GPU to record one): the replay finds the peak, not
the end, and names each live block by the library that asked for it."""

from __future__ import annotations

from rocmft.callbacks.memory_trace import GIB, owner, peak_breakdown


def _frames(*paths):
    return [{"filename": p, "line": 1, "name": f"f{i}"} for i, p in enumerate(paths)]


DS = _frames("/x/torch/nn/functional.py", "/x/site-packages/deepspeed/runtime/zero/stage3.py")
HF = _frames("/x/torch/nn/modules/linear.py", "/x/site-packages/transformers/models/llama/modeling_llama.py")


def test_owner_is_the_innermost_library_frame_then_a_non_torch_frame():
    assert owner(DS) == "deepspeed/runtime/zero/stage3.py:f1"
    # innermost first: transformers' layer inside DeepSpeed's engine.forward is the transformers frame
    assert owner(_frames("/x/torch/a.py", "/x/transformers/models/llama/modeling_llama.py",
                         "/x/deepspeed/runtime/engine.py")) == "transformers/models/llama/modeling_llama.py:f1"
    assert owner(_frames("/x/torch/a.py", "/home/u/train.py")) == "train.py:f1"
    assert owner(_frames("/x/torch/a.py")) == "torch (no caller recorded)" == owner(None)


def test_the_peak_is_the_highest_moment_with_what_was_live_then():
    events = [
        {"action": "alloc", "addr": 1, "size": 4 * GIB, "frames": DS},
        {"action": "alloc", "addr": 2, "size": 2 * GIB, "frames": HF},
        {"action": "alloc", "addr": 3, "size": 1 * GIB, "frames": HF},   # peak: 7 GiB, DS 4 + HF 3
        {"action": "free_completed", "addr": 2, "size": 2 * GIB},
        {"action": "alloc", "addr": 4, "size": 1 * GIB, "frames": HF},   # 6 GiB: below the peak
    ]
    got = peak_breakdown({"device_traces": [events]})
    assert got["traced_peak_gib"] == 7 and got["events"] == 5
    assert got["at_peak"] == [
        {"where": "deepspeed/runtime/zero/stage3.py:f1", "gib": 4.0, "blocks": 1},
        {"where": "transformers/models/llama/modeling_llama.py:f1", "gib": 3.0, "blocks": 2},
    ]


def test_a_block_whose_free_is_only_requested_is_still_live():
    """The allocator gives a block back at free_completed (after the streams that used it are done), not at
    free_requested: a new allocation in between adds to it. Here that moment is the peak: 4 + 2 + 3 GiB."""
    events = [
        {"action": "alloc", "addr": 1, "size": 4 * GIB, "frames": DS},
        {"action": "alloc", "addr": 2, "size": 2 * GIB, "frames": HF},
        {"action": "free_requested", "addr": 1, "size": 4 * GIB},
        {"action": "alloc", "addr": 3, "size": 3 * GIB, "frames": HF},   # 9 GiB with block 1 still held
        {"action": "free_completed", "addr": 1, "size": 4 * GIB},
    ]
    got = peak_breakdown({"device_traces": [events]})
    assert got["traced_peak_gib"] == 9
    assert {row["where"]: row["gib"] for row in got["at_peak"]} == {"deepspeed/runtime/zero/stage3.py:f1": 4.0,
                                                                  "transformers/models/llama/modeling_llama.py:f1": 5.0}


def test_no_history_is_an_empty_breakdown():
    assert peak_breakdown({"device_traces": []}) == {"traced_peak_gib": 0.0, "events": 0, "at_peak": [],
                                                    "other_gib": 0}
