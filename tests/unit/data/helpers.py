"""Small helpers for the dataset tests: write a JSONL file, run `prepare` on it, read what came out."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rocmft.data import prepare

ALPACA = {"instruction": "What is ROCm?", "input": "", "output": "AMD's GPU software stack."}
SHAREGPT = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]}
MESSAGES = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                         {"role": "assistant", "content": "4"}]}
GOOD = {"alpaca": ALPACA, "sharegpt": SHAREGPT, "messages": MESSAGES}


def line(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def write(path: Path, *lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(x if isinstance(x, bytes) else line(x) for x in lines))
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(src: Path, data_dir: Path, name: str | None = "ds", **kw) -> prepare.Summary:
    return prepare.run(prepare.Options(source=src, name=name, data_dir=data_dir, **kw))


def rejects(data_dir: Path, name: str = "ds") -> list[dict]:
    path = data_dir / f"{name}.rejects.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def registry(data_dir: Path) -> dict:
    return json.loads((data_dir / "dataset_info.json").read_text())
