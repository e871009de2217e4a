"""Quantised base weights (`quantization_bit`, bitsandbytes) as bytes, tensor by tensor, and what they cost a step.

Storage, per nn.Linear weight of n = out x in values (bitsandbytes 0.50.2, functional.py quantize_4bit /
quantize_blockwise, nn/modules.py Params4bit, Int8Params):
- NF4/FP4: two 4-bit codes per byte (ceil(n/2) bytes; LLaMA-Factory stores them in a tensor of the compute dtype,
  bnb_4bit_quant_storage, which holds the same bytes) and one absmax per block of 64 values (blocksize 64: the
  default on every arch since bitsandbytes 0.49.2, CDNA included - rocmft.recipe.quantization).
  - plain: an fp32 absmax per block, 4 bytes per 64 values = 0.5 bits per weight;
  - double quantisation: the absmax values, less their mean (one fp32 offset per tensor), quantised to 8 bits in
    blocks of 256 with an fp32 absmax each: 1 byte per 64 values + 4 bytes per 64 x 256 values
    = 0.125 + 0.002 = 0.127 bits per weight (QLoRA paper, sec. 3: "from 32/64 = 0.5 bits to 8/64 + 32/(64*256)
    = 0.127 bits"). The 256-entry fp32 code table is shared by all tensors.
- LLM.int8 (8 bits): one int8 per value and an fp32 scale per output row (SCB).
- Biases of quantised layers, embeddings, lm_head (transformers' bitsandbytes integration never converts the
  output embedding: get_keys_to_not_convert) and norms stay in the compute dtype.
Dequantisation: bitsandbytes' training path (autograd MatMul4Bit, for more than one token) dequantises a whole
weight to the compute dtype, runs a dense matmul, and frees it; backward dequantises it again for the input
gradient. At most one such copy is alive at a time: the largest quantised layer, in the compute dtype.
"""

from __future__ import annotations

from collections.abc import Iterable

NF4_BLOCK = 64          # values per absmax (bitsandbytes 4-bit default since 0.49.2)
DQ_BLOCK = 256          # first-level absmax values per second-level fp32 absmax (double quantisation)


def nf4_bytes(n: int, double_quant: bool = True, block: int = NF4_BLOCK) -> int:
    """Bytes of one weight of n values in 4 bits: packed codes + absmax (+ the second level with double quant)."""
    blocks = -(-n // block)
    codes = -(-n // 2)
    if not double_quant:
        return codes + 4 * blocks
    return codes + blocks + 4 * -(-blocks // DQ_BLOCK) + 4  # 8-bit absmax, fp32 per 256 of them, fp32 offset


def int8_bytes(n_in: int, n_out: int) -> int:
    """Bytes of one LLM.int8 weight (in x out): int8 values and an fp32 scale per output row."""
    return n_in * n_out + 4 * n_out


def quantised_bytes(shapes: Iterable[tuple[int, int]], bits: int, double_quant: bool = True) -> int:
    """Bytes of the quantised weights (no biases) of linears given as (in_features, out_features)."""
    total = 0
    for n_in, n_out in shapes:
        if bits == 4:
            total += nf4_bytes(n_in * n_out, double_quant)
        elif bits == 8:
            total += int8_bytes(n_in, n_out)
        else:  # HQQ/EETQ/GPTQ-style groups of 64 with a 16-bit scale and zero point: bits + 0.5 per value
            total += -(-(n_in * n_out) * bits // 8) + 4 * -(-(n_in * n_out) // 64)
    return total



# ---------------------------------------------------------------- speed
#
# What dequantisation adds to a step: each quantised weight is read in 4 bits and written out in the compute dtype
# (0.5 + 2 bytes, + the scales) once in forward, once more for the input gradient, and once in the recomputed
# forward with gradient checkpointing; the dense matmul that follows reads the 2-byte copy as a bf16 LoRA run reads
# its weight. That traffic runs at the card's memory bandwidth, while the step's matmuls run at its FLOP rate: the
# ratio of the two (FLOPs per byte) is what makes the cost small for long micro-batches and large for short ones.
# LLaMA-Factory's published comparison (github.com/hiyouga/LLaMA-Factory/wiki/Performance-comparison: LLaMA2-7B,
# A100 40GB, LoRA r8 all linears, batch 4 x 1024 tokens) measured 2,415 tokens/s/GPU with 4 bits against 2,392 in
# bf16 (101%): at 4k tokens per micro-batch the cost vanishes in the noise, as this model predicts (~2%).
DEQUANT_BYTES = 2.6      # bytes moved per weight per dequantisation (4-bit codes + scales in, a bf16 copy out)
DEQUANT_EFFICIENCY = 0.5  # share of peak bandwidth the dequantise kernel reaches (an assumption until measured)
# Dense peak FLOP/s per byte/s of memory bandwidth, by family (AMD datasheets: MI300X 1307 TFLOP/s / 5.3 TB/s;
# MI355X 2517 / 8.0; MI250X GCD 191.5 / 1.6; RX 7900 XTX 122.8 / 0.96; RX 9070 XT 194.6 / 0.64; RX 6900 XT
# fp16 46.1 / 0.512). Products of a family differ by a few tens of percent at most: the family's first product.
FLOPS_PER_BYTE = {"cdna2": 120.0, "cdna3": 247.0, "cdna4": 315.0, "rdna2": 90.0, "rdna3": 128.0, "rdna4": 304.0}
FALLBACK_FLOPS_PER_BYTE = 250.0
INT8_FACTOR = 0.5  # LLM.int8's matmul with outlier decomposition (Dettmers et al. 2022): a planning assumption


def dequant_overhead(family: str, mfu: float, tokens: int, flops_per_token_per_weight: float, passes: int) -> float:
    """Dequantisation time over the step's compute time, per micro-batch of `tokens` tokens."""
    ratio = FLOPS_PER_BYTE.get(family, FALLBACK_FLOPS_PER_BYTE)
    bytes_time = passes * DEQUANT_BYTES / DEQUANT_EFFICIENCY  # per weight, in units of bytes at peak bandwidth
    flops_time = flops_per_token_per_weight * tokens / (ratio * mfu)  # the same units: bytes' worth of FLOPs
    return bytes_time / flops_time if flops_time else 0.0
