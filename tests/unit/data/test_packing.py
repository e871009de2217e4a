"""Neat packing isolates the samples it packs: proven on the tiny model with LLaMA-Factory's own processor and collator.

The packed micro-batch goes through what a packed run uses (PackedSupervisedDatasetProcessor, position ids
restarted per sample, then SFTDataCollatorWith4DAttentionMask); each sample then runs alone, unpacked. Every label
token's loss must be the same both ways (fp32). Two routes, as LLaMA-Factory 0.9.5 takes them (data/collator.py):
- SDPA/eager (RDNA, cpu): a 4D block-diagonal mask. Its control, a plain causal mask, must fail. Restarted
  position ids do not matter on this route for a RoPE model (attention sees only position differences inside a
  block): the test says so rather than pretending they are load-bearing.
- flash_attention_2 (CDNA): micro-batch 1, padding cut off, attention_mask None, and the sample boundaries live
  only in the restarted position ids (transformers derives them: masking_utils.find_packed_sequence_indices for
  SDPA, the varlen cu_seqlens for FA2). Run here with SDPA on the collator's FA2 output; its control, position ids
  0..n-1 across the row, must fail. FA2's varlen kernel itself needs a GPU: that part is sourced, not run.
"""

from __future__ import annotations

import itertools
import json

import pytest

torch = pytest.importorskip("torch")

from llamafactory.data import (
    SFTDataCollatorWith4DAttentionMask,
    get_template_and_fix_tokenizer,
)
from llamafactory.data.processor.supervised import (
    PackedSupervisedDatasetProcessor,
    SupervisedDatasetProcessor,
)
from llamafactory.extras.constants import IGNORE_INDEX
from llamafactory.hparams import DataArguments
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.conftest import ROOT

CUTOFF = 256
TOL = 1e-5  # fp32: the same arithmetic in another order (SDPA over a longer row)


def _examples(n: int = 6) -> dict[str, list]:
    rows = [json.loads(line) for line in (ROOT / "data" / "demo_alpaca.jsonl").read_text().splitlines()[:n]]
    return {
        "_prompt": [[{"role": "user", "content": r["instruction"] + (("\n" + r["input"]) if r["input"] else "")}]
                    for r in rows],
        "_response": [[{"role": "assistant", "content": r["output"]}] for r in rows],
        "_system": [r.get("system", "") for r in rows],
        "_tools": [""] * len(rows),
        "_images": [None] * len(rows), "_videos": [None] * len(rows), "_audios": [None] * len(rows),
    }


@pytest.fixture(scope="module")
def setup(tiny_model):
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa", dtype=torch.float32).eval()
    packed_args = DataArguments(template="llama3", cutoff_len=CUTOFF, neat_packing=True)  # sets packing too
    plain_args = DataArguments(template="llama3", cutoff_len=CUTOFF)
    template = get_template_and_fix_tokenizer(tokenizer, packed_args)
    examples = _examples()
    packed = PackedSupervisedDatasetProcessor(template, tokenizer, None, packed_args).preprocess_dataset(examples)
    singles = SupervisedDatasetProcessor(template, tokenizer, None, plain_args).preprocess_dataset(examples)
    rows = [{k: packed[k][i] for k in packed} for i in range(len(packed["input_ids"]))]
    return model, template, tokenizer, rows, singles, _alone(model, singles)


def _collator(model, template, tokenizer, attn: str):
    # as llamafactory/train/sft/workflow.py builds it for a neat-packed run (block_diag_attn = neat_packing)
    return SFTDataCollatorWith4DAttentionMask(
        template=template, tokenizer=tokenizer, model=model, pad_to_multiple_of=8, label_pad_token_id=IGNORE_INDEX,
        block_diag_attn=True, neat_packing=True, attn_implementation=attn, compute_dtype=torch.float32)


def _token_losses(model, input_ids, labels, **kw) -> torch.Tensor:
    """Per-token cross-entropy of the shifted labels, as the trainer's loss computes it (IGNORE_INDEX -> nan)."""
    with torch.no_grad():
        logits = model(input_ids=input_ids, use_cache=False, **kw).logits.float()  # as in training (no cache)
    target = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), target.clamp(min=0), reduction="none")
    return torch.where(target == IGNORE_INDEX, torch.nan, loss)


def _alone(model, singles) -> dict[tuple[int, ...], torch.Tensor]:
    """Each sample's losses when it runs alone, by its token ids."""
    return {tuple(ids): _token_losses(model, torch.tensor([ids]), torch.tensor([labels]))[0]
            for ids, labels in zip(singles["input_ids"], singles["labels"])}


def _split(rows, batch, losses) -> list[tuple[tuple[int, ...], torch.Tensor]]:
    """A packed batch's per-token losses cut back into its samples, by the packer's sample boundaries."""
    out = []
    for row, ids, row_losses in zip(rows, batch["input_ids"].tolist(), losses):
        bounds = row["packing_params"]["sequence_boundaries"]
        for start, end in itertools.pairwise(bounds[:-1]):  # the last span is the row's right padding
            # a sample's last position predicts the next sample's first token: not part of its own loss
            out.append((tuple(ids[start:end]), row_losses[start:end - 1]))
    return out


def _sdpa_route(setup, *, mask: str = "block", positions: str = "restart"):
    model, template, tokenizer, rows, *_ = setup
    batch = _collator(model, template, tokenizer, "sdpa")([dict(r) for r in rows])
    kw = {}
    if mask == "block":
        assert batch["attention_mask"].dim() == 4  # the block-diagonal mask LLaMA-Factory builds for SDPA
        kw["attention_mask"] = batch["attention_mask"]
    else:  # the control: every token sees every earlier token of its row
        kw["attention_mask"] = torch.ones_like(batch["input_ids"])
    if positions == "restart":
        kw["position_ids"] = batch["position_ids"]
    return _split(rows, batch, _token_losses(model, batch["input_ids"], batch["labels"], **kw))


def _fa2_route(setup, *, positions: str = "restart"):
    """One packed row per micro-batch (LLaMA-Factory asserts it for FA2), padding removed, no attention mask."""
    model, template, tokenizer, rows, *_ = setup
    collator = _collator(model, template, tokenizer, "flash_attention_2")
    out = []
    for row in rows:
        batch = collator([dict(row)])
        assert batch["attention_mask"] is None
        n = batch["input_ids"].shape[1]
        pos = batch["position_ids"] if positions == "restart" else torch.arange(n)[None]
        losses = _token_losses(model, batch["input_ids"], batch["labels"], position_ids=pos)
        out += _split([row], batch, losses)
    return out


def _match(packed, alone) -> tuple[int, float]:
    """Each packed sample against the lone run of the same tokens: (samples compared, largest |difference|)."""
    worst = 0.0
    for ids, losses in packed:
        ref = alone[ids]
        assert torch.equal(torch.isnan(ref), torch.isnan(losses))  # the same tokens carry labels
        worst = max(worst, torch.nan_to_num(ref - losses).abs().max().item())
    return len(packed), worst


def test_packing_puts_several_samples_in_one_row(setup):
    *_, rows, singles, _ = setup
    assert len(rows) < len(singles["input_ids"])
    assert all(len(r["input_ids"]) == CUTOFF for r in rows)  # LLaMA-Factory pads each packed row to cutoff_len
    assert max(len(r["packing_params"]["sequence_boundaries"]) for r in rows) >= 4  # >= 2 samples + padding


def test_sdpa_block_diagonal_mask_losses_equal_each_sample_run_alone(setup):
    *_, alone = setup
    pairs, worst = _match(_sdpa_route(setup), alone)
    assert pairs == len(alone)
    assert worst < TOL, worst


def test_sdpa_control_a_plain_causal_mask_lets_samples_see_each_other(setup):
    *_, alone = setup
    _, worst = _match(_sdpa_route(setup, mask="causal"), alone)
    assert worst > 100 * TOL, worst


def test_sdpa_block_mask_needs_no_restarted_positions_for_rope(setup):
    # RoPE scores depend on position differences only, and the block mask keeps each sample to itself.
    *_, alone = setup
    _, worst = _match(_sdpa_route(setup, positions="arange"), alone)
    assert worst < TOL, worst


def test_fa2_route_boundaries_from_restarted_position_ids(setup):
    *_, alone = setup
    pairs, worst = _match(_fa2_route(setup), alone)
    assert pairs == len(alone)
    assert worst < TOL, worst


def test_fa2_route_control_unrestarted_position_ids_let_samples_see_each_other(setup):
    *_, alone = setup
    _, worst = _match(_fa2_route(setup, positions="arange"), alone)
    assert worst > 100 * TOL, worst
