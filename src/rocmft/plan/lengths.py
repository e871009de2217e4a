"""Each training row's length in tokens, estimated from the recipe's dataset files (what packing and padding depend on).

Rows are read from `<dataset_dir>/dataset_info.json` entries with a local `file_name` (.json/.jsonl), through
the entry's `formatting` (alpaca or sharegpt) and `columns`/`tags` as LLaMA-Factory maps them
(llamafactory/data/converter.py). Tokens are counted:
- with the recipe's tokenizer when its `tokenizer.json` is on disk (the model dir, or the Hugging Face cache) and
  the `tokenizers` package is importable - it is in the CPU training venv (transformers needs it), not in the
  light host venv, and it imports no torch, so the planner stays fast and torch-free;
- otherwise at ~4 characters per token, the usual figure for English text with BPE vocabularies of 32-150k
  entries (https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them); code and other
  languages run shorter per token. The plan says which one it used.
The chat template's markup is added per message: for llama3 and qwen, the strings LLaMA-Factory's templates
(data/template.py) wrap each message in, counted by the same tokenizer (`<|start_header_id|>role<|end_header_id|>`
+ blank line ... `<|eot_id|>`; `<|im_start|>role` + newline ... `<|im_end|>` + newline), plus llama3's
begin-of-text token and qwen's default system prompt for a row without one; ~5 tokens per message otherwise.
Each message's text is encoded on its own, as the template does. Hub datasets and binary files are not opened: the plan falls back to every row
at cutoff_len and says so.
A preference pair (`ranking: true`) is two sequences, the prompt with its chosen answer and with its rejected
one: two lengths. Pretraining (`stage: pt`) reads documents without chat markup, each followed by EOS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..io import paths
from . import models

CHARS_PER_TOKEN = 4.0
MARKUP_PER_MESSAGE = 5  # a template this module does not know
# (per row, around each message, the default system prompt) of the templates the shipped recipes use
# (llamafactory/data/template.py: llama3's format_user/format_assistant/format_prefix; qwen's, default_system).
# A message's markup is that of a user and an assistant message, averaged ({role} filled in).
TEMPLATES = {
    "llama3": ("<|begin_of_text|>", "<|start_header_id|>{role}<|end_header_id|>\n\n<|eot_id|>", ""),
    "qwen": ("", "<|im_start|>{role}\n<|im_end|>\n",
             "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
}


@dataclass(frozen=True, eq=False)  # compared by identity: a Workload carries one and suggestions share it
class Lengths:
    names: tuple[str, ...]
    tokens: tuple[int, ...]  # one estimate per row, before truncation
    how: str  # "tokenizer of models/x" | "~4 characters per token (no tokenizer on disk)"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def mean(self) -> float:
        return sum(self.tokens) / len(self.tokens) if self.tokens else 0.0


# ---------------------------------------------------------------- rows -> (texts, messages)

def _alpaca(row: Mapping[str, Any], cols: Mapping[str, str]) -> tuple[list[str], int, bool]:
    texts, messages = [], 2
    for key in ("prompt", "query", "response", "system"):
        value = row.get(cols.get(key, {"prompt": "instruction", "query": "input", "response": "output",
                                        "system": "system"}[key]))
        if isinstance(value, str) and value:
            texts.append(value)
    for pair in row.get(cols.get("history", "history")) or ():
        if isinstance(pair, (list, tuple)):
            texts += [t for t in pair if isinstance(t, str)]
            messages += 2
    has_system = bool(row.get(cols.get("system", "system")))
    return texts, messages + has_system, has_system


def _sharegpt(row: Mapping[str, Any], cols: Mapping[str, str], tags: Mapping[str, str]) -> tuple[list[str], int, bool]:
    turns = row.get(cols.get("messages", "conversations")) or []
    content, role, system_tag = tags.get("content_tag", "value"), tags.get("role_tag", "from"), tags.get("system_tag", "system")
    texts = [t.get(content) for t in turns if isinstance(t, dict) and isinstance(t.get(content), str)]
    system = row.get(cols.get("system", "system"))
    has_system = bool(system) or any(isinstance(t, dict) and t.get(role) == system_tag for t in turns)
    if isinstance(system, str) and system:
        texts.append(system)
    return texts, len(turns) + (1 if isinstance(system, str) and system else 0), has_system


def _answers(row: Mapping[str, Any], cols: Mapping[str, str], tags: Mapping[str, str], sharegpt: bool) -> list[str]:
    """A pair's chosen and rejected texts (strings in alpaca, one turn each in sharegpt)."""
    found = []
    for key in ("chosen", "rejected"):
        value = row.get(cols.get(key, key))
        if sharegpt and isinstance(value, dict):
            value = value.get(tags.get("content_tag", "value"))
        found.append(value if isinstance(value, str) else "")
    return found


def _rows(path: Path) -> Iterator[Any]:
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    for file in files:
        if file.suffix.lower() == ".jsonl":
            with file.open(encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        yield json.loads(line)
        elif file.suffix.lower() == ".json":
            text = file.read_text(encoding="utf-8")
            try:
                data = json.loads(text)
            except ValueError:
                data = [json.loads(line) for line in text.splitlines() if line.strip()]
            yield from (data if isinstance(data, list) else [data])
        else:
            raise ValueError(f"{file.name}: only .json/.jsonl rows are read")


# ---------------------------------------------------------------- tokens

def tokenizer_file(model: str) -> Path | None:
    """The model's tokenizer.json: a local model dir, or the newest snapshot in the Hugging Face cache."""
    local = models._local_dir(model) if model else None
    if local is not None:
        return local / "tokenizer.json" if (local / "tokenizer.json").is_file() else None
    config = models._cached_config(model) if model else None
    if config is not None and (config.parent / "tokenizer.json").is_file():
        return config.parent / "tokenizer.json"
    return None


@lru_cache(maxsize=4)
def _tokenizer(path: str):
    from tokenizers import (
        Tokenizer,  # the CPU venv has it; the light host may not (then: characters)
    )

    return Tokenizer.from_file(path)


def counter(model: str) -> tuple[Any, str]:
    """(a function from a list of texts to their token counts, how it counts)."""
    path = tokenizer_file(model)
    if path is not None:
        try:
            tok = _tokenizer(str(path))
        except ImportError:
            why = "no `tokenizers` package here (it comes with `make setup`)"
        except Exception as exc:  # noqa: BLE001 - a tokenizer.json the library cannot read
            why = f"cannot read {path.name}: {str(exc).splitlines()[0][:80]}"
        else:
            where = path.parent
            try:
                where = where.relative_to(paths.root())
            except ValueError:
                pass
            return (lambda texts: [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)],
                    f"the recipe's tokenizer ({where})")
    else:
        why = "the recipe's tokenizer is not on disk"
    return (lambda texts: [round(len(t) / CHARS_PER_TOKEN) for t in texts],
            f"~{CHARS_PER_TOKEN:g} characters per token ({why})")


def _markup(lf: Mapping[str, Any], count, how: str) -> tuple[float, float, float]:
    """Tokens of the template's markup: (per row, per message, the default system prompt of a row without one)."""
    known = TEMPLATES.get(str(lf.get("template") or ""))
    if str(lf.get("stage") or "sft") == "pt":
        return 1, 0, 0  # the document and its EOS (data/processor/pretrain.py)
    if known and how.startswith("~"):  # characters would count each special token as a dozen: the fixed figures
        return (1 if known[0] else 0), MARKUP_PER_MESSAGE, (count([known[2]])[0] + MARKUP_PER_MESSAGE if known[2] else 0)
    if known:
        prefix, message, default_system = known
        per_row, user, assistant, system = count([prefix, message.format(role="user"),
                                                  message.format(role="assistant"), default_system])
        return per_row, (user + assistant) / 2, (system + count([message.format(role="system")])[0] if default_system else 0)
    return 1, MARKUP_PER_MESSAGE, 0


PROFILES_FILE = Path(__file__).with_name("profiles.json")


@lru_cache(maxsize=1)
def _profiles() -> dict[str, Any]:
    return json.loads(PROFILES_FILE.read_text(encoding="utf-8"))["profiles"]


def profile(lf: Mapping[str, Any]) -> Lengths:
    """The reference length profile for the recipe's stage (profiles.json, with where its lengths come from): each
    text at ~4 characters per token, the template's markup as `read` counts it."""
    stage = str(lf.get("stage") or "sft")
    name, found = next(((n, p) for n, p in _profiles().items() if stage in p["stages"]), ("sft", _profiles()["sft"]))
    count, how = counter(str(lf.get("model_name_or_path") or ""))
    per_row, per_message, system_tokens = _markup(lf, count, how)
    tokens = tuple(round(per_row + per_message * seq[0] + system_tokens + sum(round(c / CHARS_PER_TOKEN) for c in seq[1:]))
                   for row in found["rows"] for seq in row)
    return Lengths((f"reference profile `{name}`",), tokens,
                   f"~{CHARS_PER_TOKEN:g} characters per token ({found['what']}; {found['source']})")


def read(lf: Mapping[str, Any]) -> Lengths | None | str:
    """Row lengths for the recipe's datasets, or a sentence saying why they cannot be read (hub, binary...)."""
    names = tuple(n.strip() for n in str(lf.get("dataset") or "").split(",") if n.strip())
    if not names:
        return "no `dataset` set"
    folder = Path(str(lf.get("dataset_dir") or "data"))
    if not folder.is_absolute():
        folder = paths.root() / folder
    try:
        info = json.loads((folder / "dataset_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{folder / 'dataset_info.json'} not readable"
    count, how = counter(str(lf.get("model_name_or_path") or ""))
    per_row, per_message, system_tokens = _markup(lf, count, how)
    max_samples = lf.get("max_samples")
    tokens: list[int] = []
    notes: list[str] = []
    for name in names:
        entry = info.get(name)
        if not isinstance(entry, dict):
            return f"`{name}` is not in dataset_info.json"
        if not entry.get("file_name"):
            return f"`{name}` is a hub dataset (not on disk until downloaded)"
        cols, tags = entry.get("columns") or {}, entry.get("tags") or {}
        sharegpt = entry.get("formatting", "alpaca") == "sharegpt"
        texts, owner, markup = [], [], []
        rows = 0
        try:
            for row in _rows(folder / str(entry["file_name"])):
                if not isinstance(row, dict):
                    continue
                parts, messages, has_system = _sharegpt(row, cols, tags) if sharegpt else _alpaca(row, cols)
                # a pair: the prompt once with each answer (its alpaca `output` column is none: no text counted)
                sequences = [parts + [a] for a in _answers(row, cols, tags, sharegpt)] if entry.get("ranking") else [parts]
                for seq in sequences:
                    texts += seq
                    owner += [len(markup)] * len(seq)
                    # sharegpt counted the prompt's turns; alpaca's two messages already hold the answer's
                    answer = len(seq) - len(parts) if sharegpt else 0
                    markup.append(per_row + per_message * (messages + answer) + (0 if has_system else system_tokens))
                rows += 1
                if isinstance(max_samples, int) and 0 < max_samples <= rows:
                    notes.append(f"`{name}` capped at max_samples={max_samples}")
                    break
        except (OSError, ValueError) as exc:
            return f"`{name}`: cannot read rows of {entry['file_name']} ({str(exc).splitlines()[0][:80]})"
        for row, n in zip(owner, count(texts)):
            markup[row] += n
        tokens += [round(n) for n in markup]
    if not tokens:
        return "no rows found"
    return Lengths(names, tuple(tokens), how, tuple(notes))
