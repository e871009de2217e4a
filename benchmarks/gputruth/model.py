"""The model a configuration trains (random weights of the planner's shape, the tiny tokenizer) and its data."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from . import ROOT


def model_config(spec, tokenizer_dir: Path) -> dict:
    """A transformers config of the planner's model shape, with the tiny tokenizer's special token ids."""
    special = json.loads((tokenizer_dir / "config.json").read_text())
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers, "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads, "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size, "tie_word_embeddings": spec.tie_word_embeddings,
        "attention_bias": spec.attention_bias, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}, "hidden_act": "silu", "initializer_range": 0.02, "dtype": "bfloat16",
        "bos_token_id": special.get("bos_token_id"), "eos_token_id": special.get("eos_token_id"),
        "pad_token_id": special.get("pad_token_id"),
    }


def random_model(config: dict, tokenizer_dir: Path, out: Path, device: str) -> float:
    """Random weights of `config` drawn on `device`, saved as safetensors with the tiny tokenizer; seconds taken."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    cfg = AutoConfig.for_model(**config)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(out, max_shard_size="4GB")
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    for name in os.listdir(tokenizer_dir):
        if name.startswith(("tokenizer", "special_tokens")) or name == "chat_template.jinja":
            shutil.copy2(tokenizer_dir / name, out / name)
    return time.perf_counter() - t0


def shape_only(config: dict, tokenizer_dir: Path, out: Path) -> Path:
    """What the planner reads of a model (config.json, the tokenizer for row lengths), without weights."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in os.listdir(tokenizer_dir):
        if name.startswith(("tokenizer", "special_tokens")) or name == "chat_template.jinja":
            shutil.copy2(tokenizer_dir / name, out / name)
    return out


def demo_data(folder: Path, repeats: int) -> str:
    """The demo's alpaca rows repeated `repeats` times under `folder`, registered as `gpu_truth_alpaca`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = (ROOT / "data" / "demo_alpaca.jsonl").read_text().splitlines()
    (folder / "gpu_truth_alpaca.jsonl").write_text("".join(f"{r}\n" for _ in range(repeats) for r in rows if r.strip()))
    info = json.loads((ROOT / "data" / "dataset_info.json").read_text())["demo_alpaca"]
    (folder / "dataset_info.json").write_text(json.dumps({"gpu_truth_alpaca": {**info, "file_name": "gpu_truth_alpaca.jsonl"}}))
    return "gpu_truth_alpaca"
