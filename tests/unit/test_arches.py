"""The arch table's corrected values, each pinned with the source that decides it (issue 15)."""

from __future__ import annotations

from rocmft import arches
from rocmft.launch import plan as launch_plan

TABLE = arches.table()


def test_triton_flash_attn_arches_enable_it_at_run_time():
    # flash-attn 2.8.3 flash_attn/flash_attn_interface.py:
    #   USE_TRITON_ROCM = os.getenv("FLASH_ATTENTION_TRITON_AMD_ENABLE", "FALSE") == "TRUE"  (read at import)
    # https://github.com/Dao-AILab/flash-attention/blob/v2.8.3/flash_attn/flash_attn_interface.py
    for name, arch in TABLE.items():
        want = "TRUE" if arch.flash_attn == "triton" else None
        assert arch.env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE") == want, name
    assert {n for n, a in TABLE.items() if a.flash_attn == "triton"} == {"gfx1100", "gfx1101", "gfx1201"}


def test_aotriton_experimental_only_where_aotriton_says_so():
    # PyTorch sdp_utils.cpp asks aotriton::isArchExperimentallySupported(), which returns true for
    # gfx950, gfx1151 and gfx1201 only (ROCm/aotriton v2src util.cc); elsewhere the variable does nothing.
    have = {n for n, a in TABLE.items() if a.env.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL") == "1"}
    assert have == {"gfx950", "gfx1201"}


def test_rx_9070_xt_peak_is_the_derived_figure():
    # Derived, not published (the old 194.7 was labelled AMD spec and rounded wrong): 64 CUs x 2.97 GHz x 1024 dense bf16 FLOP/clock/CU (the table says so).
    assert round(64 * 2.97e9 * 1024 / 1e12, 1) == TABLE["gfx1201"].peak("bf16") == 194.6


def test_min_nchannels_only_on_a_full_single_mi300x_node():
    # AMD's RCCL guidance: NCCL_MIN_NCHANNELS=112 for one 8-GPU MI300X node; its multi-node validation uses 40.
    gfx942 = TABLE["gfx942"]
    assert "NCCL_MIN_NCHANNELS" not in gfx942.env
    assert dict(gfx942.full_node_env) == {"NCCL_MIN_NCHANNELS": "112"}
    full, _, _ = launch_plan._environment(gfx942, {}, None, 1, 8)
    partial, _, _ = launch_plan._environment(gfx942, {}, None, 1, 4)
    multi, _, _ = launch_plan._environment(gfx942, {}, None, 2, 8)
    assert full["NCCL_MIN_NCHANNELS"] == "112"
    assert "NCCL_MIN_NCHANNELS" not in partial and "NCCL_MIN_NCHANNELS" not in multi
    # ROCm's default since 6.2; kept explicit for older bases (the table says so beside it).
    assert full["HIP_FORCE_DEV_KERNARG"] == "1"
