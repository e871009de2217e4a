#!/usr/bin/env python3
"""Build the tiny Llama that `make demo` and the tests train, offline (no hub), in ~2 seconds.

A 2-layer Llama (hidden 64) with random weights and a byte-level BPE tokenizer trained here on generated
text. The tokenizer carries the Llama-3 and Qwen chat special tokens as single tokens: LLaMA-Factory's
`llama3` and `qwen` templates index them, and a missing one crashes training (IndexError).
Deterministic: the same seed gives the same model, so test losses are comparable run to run.

The output layer is drawn 6x larger than transformers' init (std 0.12, not 0.02). With the default, the final
RMSNorm bounds every logit below ~1.3, so no LoRA (which leaves lm_head and the norms frozen) can make the
model sure of any token: the demo's taught answer stayed out of reach at loss ~2.4. At 6x a logit can reach
~8 and `make demo` memorises its sentence (4x: memorised, but the loss fell too little; 8x: tiny-cpu's 12
steps learned to answer with spaces only). Greedy answers of the untrained model are the same (a scaled
lm_head keeps each argmax).

`--family` builds a tiny model of another architecture family the same way, for the GPU recipes' CPU rehearsal
(tests/train/test_gpu_recipes_rehearsed.py): qwen3, qwen3_moe, gpt_oss (experts and alternating sliding layers) and
gemma3 (Gemma3ForConditionalGeneration with a one-layer SigLIP tower and a Gemma3Processor, which LLaMA-Factory's
gemma3 template reads even for text). Each tokenizer carries its template's special tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
from pathlib import Path

LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|eom_id|>"]
OUTPUT_SCALE = 6.0
VERSION = 2  # in rocmft-tiny.json: a model built by an older script is rebuilt (1: lm_head at transformers' scale)
QWEN_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
WORDS = ("rocm gpu amd train model loss step token batch lora adapter rank learning rate data set json line "
         "memory node zero stage shard weight gradient optimizer adam precision float bfloat half fine tune "
         "the a an of to in on for with is are was be this that it and or not yes no what how why when "
         "one two three four five six seven eight nine ten plus minus equals answer question hello world").split()


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))))
        lines.append(f"{rng.randint(0, 99)} + {rng.randint(0, 99)} = {rng.randint(0, 198)}.")
    return lines


DTYPES = ("float32", "bfloat16", "float16")


# Per family: (the special tokens its LLaMA-Factory template needs, bos, eos, pad, extra named tokens).
FAMILY_TOKENS = {
    "qwen3": (QWEN_SPECIAL + ["<think>", "</think>"], None, "<|im_end|>", "<|endoftext|>", {}),
    "qwen3_moe": (QWEN_SPECIAL + ["<think>", "</think>"], None, "<|im_end|>", "<|endoftext|>", {}),
    "gpt_oss": (["<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|return|>", "<|endoftext|>"], None,
                "<|return|>", "<|endoftext|>", {}),
    "gemma3": (["<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
                "<image_soft_token>"], "<bos>", "<eos>", "<pad>",
               {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}),
}
FAMILIES = ("llama", *FAMILY_TOKENS)
FAMILY_VERSION = 1  # in rocmft-tiny.json of a family's model: a change to family_config rebuilds them


def family_config(family: str, tokenizer):
    """A 2-layer model of the family, hidden 64, with what makes the family differ kept: experts, layer types."""
    import transformers

    ids = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
               bos_token_id=tokenizer.bos_token_id)
    shape = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 max_position_embeddings=2048, tie_word_embeddings=False)
    if family == "qwen3":
        return transformers.Qwen3Config(intermediate_size=128, **shape, **ids)
    if family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(intermediate_size=128, moe_intermediate_size=32, num_experts=4,
                                           num_experts_per_tok=2, **shape, **ids)
    if family == "gpt_oss":
        return transformers.GptOssConfig(intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                                         sliding_window=16, **shape, **ids)
    text = transformers.Gemma3TextConfig(intermediate_size=128, sliding_window=16,
                                         layer_types=["sliding_attention", "full_attention"], **shape, **ids)
    # widths of 64: bitsandbytes quantises the tower too (4-bit blocks of 64 values), as on the real model
    vision = transformers.SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                             num_attention_heads=2, image_size=28, patch_size=14, vision_use_head=False)
    return transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                                     boi_token_index=tokenizer.convert_tokens_to_ids("<start_of_image>"),
                                     eoi_token_index=tokenizer.convert_tokens_to_ids("<end_of_image>"),
                                     image_token_index=tokenizer.convert_tokens_to_ids("<image_soft_token>"),
                                     tie_word_embeddings=True)


def build_family(out: Path, family: str, seed: int = 0) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    special, bos, eos, pad, named = FAMILY_TOKENS[family]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(2000, seed), trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad, extra_special_tokens=named,
        additional_special_tokens=[t for t in special if t not in (bos, eos, pad)])
    tokenizer.model_max_length = 2048
    torch.manual_seed(seed)
    config = family_config(family, tokenizer)
    if family == "gemma3":
        model = transformers.Gemma3ForConditionalGeneration(config)
        # the PIL image processor: the CPU venv has no torchvision (the Gemma3ImageProcessor default needs it)
        from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

        processor = transformers.Gemma3Processor(image_processor=Gemma3ImageProcessorPil(size={"height": 28, "width": 28}),
                                                 tokenizer=tokenizer, image_seq_length=4)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
        processor = None
    with torch.no_grad():
        for param in model.parameters():  # routed experts are torch.empty until initialised: give every weight a value
            if param.dim() > 1 and not param.isfinite().all():
                param.normal_(std=0.02)
        model.get_output_embeddings().weight.mul_(OUTPUT_SCALE)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if processor is not None:
        processor.save_pretrained(out)
    for f in out.iterdir():
        f.chmod(0o644)
    (out / "rocmft-tiny.json").write_text(json.dumps(stamp(seed, family=family)) + "\n")


def build(out: Path, seed: int = 0, dtype: str = "float32", widen: bool = False) -> None:
    """`dtype`: the weights are rounded to it and stored in it (a canary's model, stored as Hub checkpoints are in
    the dtype a run computes in); `widen`: rounded to it, stored in float32 (the same values, exactly: the
    canary's fp32 reference starts from them)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=LLAMA3_SPECIAL + QWEN_SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(2000, seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<|end_of_text|>",
        additional_special_tokens=[t for t in LLAMA3_SPECIAL + QWEN_SPECIAL
                                   if t not in ("<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>")],
    )
    tokenizer.model_max_length = 2048

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(OUTPUT_SCALE)
    if dtype != "float32":
        model = model.to(getattr(torch, dtype))
        if widen:
            model = model.to(torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # save_pretrained writes 0600 files: a container running as another user could not read them.
    for f in out.iterdir():
        f.chmod(0o644)
    (out / "rocmft-tiny.json").write_text(json.dumps(stamp(seed, dtype, widen)) + "\n")


def stamp(seed: int, dtype: str = "float32", widen: bool = False, family: str = "llama") -> dict:
    extra = {"dtype": dtype, "stored": "float32" if widen else dtype} if dtype != "float32" else {}
    if family != "llama":
        extra.update(family=family, family_version=FAMILY_VERSION)
    return {"seed": seed, "built_by": "scripts/make_tiny_model.py", "version": VERSION, **extra}


def current(out: Path, seed: int, dtype: str = "float32", widen: bool = False, family: str = "llama") -> bool:
    try:
        return json.loads((out / "rocmft-tiny.json").read_text()) == stamp(seed, dtype, widen, family)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def output_to(log: Path):
    """Everything the libraries print while building (DeepSpeed's "Setting accelerator to CPU", transformers'
    "Writing model shards" bar) goes to `log`, at the file-descriptor level so tqdm and C code land there too;
    it is shown only when the build fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]

    def restore() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved_fd in zip((1, 2), saved):
            os.dup2(saved_fd, fd)
            os.close(saved_fd)

    with open(log, "wb") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            restore()
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise
        restore()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="models/tiny-llama")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="rebuild even if the model exists")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="round the weights to this dtype and store them in it")
    parser.add_argument("--widen", action="store_true", help="with --dtype: store the rounded weights in float32")
    parser.add_argument("--family", choices=FAMILIES, default="llama", help="another architecture family (float32)")
    args = parser.parse_args()
    out = Path(args.out)
    if current(out, args.seed, args.dtype, args.widen, args.family) and not args.force:
        print(f"tiny model: {out} (exists)")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    log = out / "build.log"
    with output_to(log):
        if args.family == "llama":
            build(out, args.seed, args.dtype, args.widen)
        else:
            build_family(out, args.family, args.seed)
    print(f"tiny model: {out} (built; the libraries' output: {log})")


if __name__ == "__main__":
    main()
