"""Real tokens per micro-batch, padded or packed, from the rows' lengths (LLaMA-Factory 0.9.5's own rules).

- Padded (no packing): each row is truncated to cutoff_len (data/processor/supervised.py, infer_seqlen), the
  trainer draws rows at random (group_by_length is off by default) and the collator pads a micro-batch of b
  rows to its longest, rounded up to 8 (train/sft/workflow.py: pad_to_multiple_of=8). Computed tokens per
  micro-batch = b x E[longest of b rows], the expectation taken over the measured lengths (draws with
  replacement: E[max] = sum_k x_(k) [(k/n)^b - ((k-1)/n)^b]). Attention spans the padded length.
- Packed (`packing` / `neat_packing`): data_args.py shortens cutoff_len by one, rows are truncated to it, and
  each preprocessing batch (preprocessing_batch_size, 1000 rows) is packed by `greedy_knapsack`
  (data/processor/processor_utils.py, reproduced here) into rows of cutoff_len tokens, the tail padded.
  With SDPA/eager every packed row computes all cutoff_len positions (the 4D mask of neat_packing masks,
  it does not skip) and attention spans cutoff_len. With flash_attention_2 and neat_packing the collator
  cuts the padding off (SFTDataCollatorWith4DAttentionMask._unpad_packed_features) and the varlen kernel
  attends within each sample: computed = real tokens, attention spans each sample's own length. Whether the
  kernel computes the whole span or only its causal half is throughput.attention_kernel's question.
- Pretraining packed (`stage: pt`, packing on by default): no knapsack. The documents, each with its EOS, are
  concatenated and cut into blocks of cutoff_len - 1 tokens, the tail shorter than a block dropped
  (data/processor/pretrain.py): every row is full, and a text shorter than one block gives no row at all.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

from .lengths import Lengths

PAD_TO_MULTIPLE = 8
PREPROCESSING_BATCH = 1000


@dataclass(frozen=True)
class Batching:
    mode: str  # padded | packing | neat_packing
    rows: int  # training rows per epoch (packed rows when packing)
    real: float  # real (non-padding) tokens per micro-batch, on average
    computed: float  # tokens the GPU computes per micro-batch
    slots: int  # micro_batch x cutoff_len: the bound the plan used before it counted
    attn_span: float  # tokens each computed token's attention spans (for the attention FLOPs)
    truncated: int  # rows longer than the cutoff (truncated)
    epoch_tokens: int  # real tokens in one epoch

    @property
    def padding(self) -> float:
        """The share of computed tokens that are padding."""
        return 1.0 - self.real / self.computed if self.computed else 0.0

    @property
    def real_fraction(self) -> float:
        return self.real / self.computed if self.computed else 1.0


def greedy_knapsack(numbers: list[int], capacity: int) -> list[list[int]]:
    """LLaMA-Factory's packer: repeatedly fill a row with the longest length that still fits."""
    numbers = sorted(numbers)
    knapsacks = []
    while numbers:
        current, remaining = [], capacity
        while True:
            index = bisect.bisect(numbers, remaining) - 1
            if index < 0:
                break
            remaining -= numbers[index]
            current.append(numbers.pop(index))
        if not current:  # a length over the capacity (never: rows are truncated first)
            break
        knapsacks.append(current)
    return knapsacks


def expected_max(sorted_lengths: tuple[int, ...], b: int) -> float:
    n = len(sorted_lengths)
    return sum(x * ((k / n) ** b - ((k - 1) / n) ** b) for k, x in enumerate(sorted_lengths, 1))


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


@lru_cache(maxsize=256)
def blocks(lengths: Lengths, micro_batch: int, cutoff_len: int) -> Batching:
    """Pretraining's packing: full blocks of cutoff_len - 1 tokens, no padding; the tail is not trained."""
    block = cutoff_len - 1
    rows = sum(lengths.tokens) // block
    full = float(micro_batch * block)
    return Batching("blocks", rows, full, full, micro_batch * cutoff_len, float(block), 0, rows * block)


@lru_cache(maxsize=256)
def compute(lengths: Lengths, micro_batch: int, cutoff_len: int, mode: str, attention: str) -> Batching:
    """Tokens per micro-batch for `mode` (padded | packing | neat_packing) and the arch's attention."""
    slots = micro_batch * cutoff_len
    if mode == "padded":
        clipped = tuple(sorted(min(n, cutoff_len) for n in lengths.tokens))
        padded = tuple(_round_up(n, PAD_TO_MULTIPLE) for n in clipped)
        mean = sum(clipped) / len(clipped)
        longest = expected_max(padded, micro_batch)
        return Batching(mode, len(clipped), micro_batch * mean, micro_batch * longest, slots, longest,
                        sum(n > cutoff_len for n in lengths.tokens), sum(clipped))
    capacity = cutoff_len - 1
    clipped = [min(n, capacity) for n in lengths.tokens]
    rows = []
    for start in range(0, len(clipped), PREPROCESSING_BATCH):
        rows += greedy_knapsack(clipped[start:start + PREPROCESSING_BATCH], capacity)
    total = sum(clipped)
    real = micro_batch * total / len(rows)
    if mode == "neat_packing" and attention == "fa2":
        computed, span = real, sum(n * n for n in clipped) / total
    else:
        computed, span = float(slots), float(cutoff_len)
    return Batching(mode, len(rows), real, computed, slots, span, sum(n > capacity for n in lengths.tokens), total)
