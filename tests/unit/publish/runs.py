"""Run dirs as `make train` leaves them, written by hand for the refusal tests (what is read: train.yaml,
status.json, output/, merged/); the real trainings' runs are in tests/train/test_publish_cpu.py."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ADAPTER = {"adapter_config.json": b"{}", "adapter_model.safetensors": b"\0" * 64, "tokenizer.json": b"{}",
           "tokenizer_config.json": b"{}", "chat_template.jinja": b"{{ x }}", "trainer_log.jsonl": b"",
           "README.md": b"peft's own", "training_args.bin": b"pickle"}


def make_run(runs: Path, name: str = "r", *, state: str = "succeeded", finetuning_type: str = "lora",
             quantization_bit: int | None = None, architecture: str | None = "LlamaForCausalLM",
             merged: bool = True, model: str = "models/tiny-llama") -> Path:
    run = runs / name
    (run / "output" / "checkpoint-2").mkdir(parents=True)
    train = {"model_name_or_path": model, "stage": "sft", "finetuning_type": finetuning_type, "template": "llama3",
             "dataset": "demo_alpaca,my-org/support-chats", "output_dir": f"{run}/output"}
    if quantization_bit:
        train["quantization_bit"] = quantization_bit
    (run / "train.yaml").write_text(yaml.safe_dump(train))
    (run / "status.json").write_text(json.dumps({"recipe": "tiny-cpu", "state": state, "steps": 12, "final_loss": 1.25}))
    for file, data in ADAPTER.items():
        (run / "output" / file).write_bytes(data)
    (run / "output" / "checkpoint-2" / "adapter_model.safetensors").write_bytes(b"\0")
    if merged and architecture:
        (run / "merged").mkdir()
        (run / "merged" / "config.json").write_text(json.dumps({"architectures": [architecture]}))
        (run / "merged" / "model.safetensors").write_bytes(b"\1" * 32)
        (run / "merged" / "tokenizer.json").write_text("{}")
        (run / "merged" / "Modelfile").write_text("FROM .\n")
    return run


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
