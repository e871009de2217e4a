"""A model's architecture (the few config.json numbers the planner needs) and its parameter counts.

Where it comes from, first match wins:
1. the recipe's `plan.model:` block (the architecture written inline, for a model nobody has locally);
2. a local model dir (`model_name_or_path` relative to the project root, or absolute) with a config.json;
3. the Hugging Face cache on this machine (`$HF_HUB_CACHE`, `$HF_HOME/hub`, ~/.cache/huggingface/hub);
4. the table in models.yaml next to this file (published configs, source noted per entry).
Only JSON/YAML is read: no transformers, no network.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import yaml

from ..io import paths
from ..io.problems import Problem, ProblemReport, did_you_mean

TABLE_FILE = Path(__file__).with_name("models.yaml")
REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
OPTIONAL_KEYS = ("num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias", "model_type")
# Every LoRA target a Llama/Qwen/Mistral decoder layer has; LLaMA-Factory's `lora_target: all` means all of them
# (every nn.Linear except lm_head: llamafactory/model/model_utils/misc.py find_all_linear_modules).
LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# transformers' Gemma/Gemma2 configs default to tied embeddings; the Llama/Qwen/Mistral ones do not.
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # where the numbers came from: a file path or a URL
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    head_dim: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    model_type: str = ""

    # ------------------------------------------------------------ shapes
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear layer in one decoder layer."""
        h, i = self.hidden_size, self.intermediate_size
        return {
            "q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
            "o_proj": (self.q_dim, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h),
        }

    # ------------------------------------------------------------ parameter counts
    @cached_property
    def layer_linear_params(self) -> int:
        """Weights of the seven linear layers of one decoder layer (what 4/8-bit quantization quantizes)."""
        weights = sum(a * b for a, b in self.linear_shapes().values())
        bias = (self.q_dim + 2 * self.kv_dim) if self.attention_bias else 0
        return weights + bias

    @property
    def layer_norm_params(self) -> int:
        extra = 2 * self.head_dim if self.model_type == "qwen3" else 0  # Qwen3 q_norm/k_norm
        return 2 * self.hidden_size + extra

    @cached_property
    def layer_params(self) -> int:
        return self.layer_linear_params + self.layer_norm_params

    @property
    def embed_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def head_params(self) -> int:
        """lm_head weights stored separately (0 when tied to the embeddings)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @cached_property
    def total_params(self) -> int:
        return (self.num_hidden_layers * self.layer_params + self.embed_params + self.head_params
                + self.hidden_size)  # final norm

    @cached_property
    def matmul_params(self) -> int:
        """Parameters that take part in a matmul per token: decoder linears + the lm_head (tied or not)."""
        return self.num_hidden_layers * self.layer_linear_params + self.vocab_size * self.hidden_size


# ---------------------------------------------------------------- building a spec

def needed_keys_text() -> str:
    return ", ".join(REQUIRED_KEYS) + " (and num_key_value_heads, head_dim, tie_word_embeddings when the model has them)"


def from_config(name: str, config: Mapping[str, Any], source: str, file: str = "", key: str = "model_name_or_path") -> ModelSpec:
    """A spec from a config.json-like mapping. Multimodal configs keep the language model under text_config."""
    cfg = dict(config)
    if "hidden_size" not in cfg:
        for nested in ("text_config", "language_config", "llm_config"):
            if isinstance(cfg.get(nested), Mapping) and "hidden_size" in cfg[nested]:
                cfg = {**cfg, **cfg[nested]}
                break
    for moe_key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if cfg.get(moe_key):
            raise ProblemReport([Problem(file, key, f"`{name}` is a mixture-of-experts model ({moe_key}={cfg[moe_key]})",
                                         "the planner models dense decoder-only models only")])
    missing = [k for k in REQUIRED_KEYS if not isinstance(cfg.get(k), int) or isinstance(cfg.get(k), bool) or cfg[k] <= 0]
    if missing:
        raise ProblemReport([Problem(file, key, f"the architecture of `{name}` ({source}) lacks {', '.join(missing)}",
                                     f"the planner needs {needed_keys_text()}")])
    heads = int(cfg["num_attention_heads"])
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    model_type = str(cfg.get("model_type") or "")
    tied = cfg.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT
    return ModelSpec(
        name=name, source=source,
        hidden_size=int(cfg["hidden_size"]), intermediate_size=int(cfg["intermediate_size"]),
        num_hidden_layers=int(cfg["num_hidden_layers"]), num_attention_heads=heads,
        num_key_value_heads=int(kv), vocab_size=int(cfg["vocab_size"]), head_dim=int(head_dim),
        tie_word_embeddings=bool(tied), attention_bias=bool(cfg.get("attention_bias", False)),
        model_type=model_type,
    )


@cache
def _table(path: str) -> dict[str, dict[str, Any]]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in (raw.get("models") or {}).items():
        for alias in (name, *(entry.get("aliases") or ())):
            entries[alias.lower()] = {**entry, "_name": name}
    return entries


def table_names() -> list[str]:
    raw = yaml.safe_load(TABLE_FILE.read_text(encoding="utf-8")) or {}
    names = []
    for name, entry in (raw.get("models") or {}).items():
        names += [name, *(entry.get("aliases") or ())]
    return names


def from_table(name: str) -> ModelSpec | None:
    entries = _table(str(TABLE_FILE))
    entry = entries.get(name.lower())
    if entry is None:
        # A mirror under another organisation (ModelScope `LLM-Research/...`) or a renamed local folder name:
        # match the last path component when exactly one table entry has it.
        base = name.rstrip("/").rsplit("/", 1)[-1].lower()
        hits = {e["_name"] for k, e in entries.items() if k.rsplit("/", 1)[-1] == base}
        if len(hits) != 1:
            return None
        entry = next(e for e in entries.values() if e["_name"] in hits)
    canonical = entry["_name"]
    source = f"models table{'' if canonical.lower() == name.lower() else f' ({canonical})'}: {entry.get('source', TABLE_FILE.name)}"
    return from_config(name, entry, source)


def _hub_caches() -> list[Path]:
    found = []
    if os.environ.get("HF_HUB_CACHE"):
        found.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        found.append(Path(os.environ["HF_HOME"]) / "hub")
    found.append(Path.home() / ".cache" / "huggingface" / "hub")
    return found


def _cached_config(name: str) -> Path | None:
    if name.count("/") != 1:
        return None
    folder = "models--" + name.replace("/", "--")
    for hub in _hub_caches():
        snapshots = hub / folder / "snapshots"
        if snapshots.is_dir():
            configs = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
            if configs:
                return configs[0]
    return None


def _local_dir(name: str) -> Path | None:
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = paths.root() / path
    return path if path.is_dir() else None


def _read_config(path: Path, file: str, key: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProblemReport([Problem(file, key, f"cannot read {path}: {exc}")]) from None
    if not isinstance(data, dict):
        raise ProblemReport([Problem(file, key, f"{path} is not a JSON object")])
    return data


def resolve(name: str, inline: Mapping[str, Any] | None = None, *, file: str = "",
            key: str = "llamafactory.model_name_or_path") -> ModelSpec:
    """The architecture of `model_name_or_path`, or a ProblemReport saying which keys are needed and where."""
    if inline:
        if not isinstance(inline, Mapping):
            raise ProblemReport([Problem(file, "plan.model", "must be a mapping of config.json keys",
                                         f"the planner needs {needed_keys_text()}")])
        return from_config(name or "plan.model", inline, "recipe plan.model", file, "plan.model")
    if not name:
        raise ProblemReport([Problem(file, key, "missing: the model to fine-tune (a hub id or a local dir)")])
    local = _local_dir(name)
    if local is not None:
        config = local / "config.json"
        if not config.is_file():
            raise ProblemReport([Problem(file, key, f"local model dir `{name}` has no config.json",
                                         f"the planner reads {needed_keys_text()} from it")])
        return from_config(name, _read_config(config, file, key), str(config), file, key)
    cached = _cached_config(name)
    if cached is not None:
        return from_config(name, _read_config(cached, file, key), str(cached), file, key)
    spec = from_table(name)
    if spec is not None:
        return spec
    if paths.is_tiny_model(name, paths.root()):  # a fresh clone: built on demand by `make train`, not by the planner
        return _raise(file, key, f"the tiny model `{name}` is not built yet",
                      "`make tiny-model` builds it in seconds; `make train` and `make demo` build it when missing")
    looks_local = name.startswith((".", "/", "~")) or name.count("/") != 1
    where = "is not a local dir" + ("" if looks_local else ", not in the Hugging Face cache") + " and not in the model table"
    hint = did_you_mean(name, table_names())
    how = (f"the planner needs {needed_keys_text()} from the model's config.json: put the model dir (with config.json) "
           f"at `{name}`, or write those keys under `plan: model:` in the recipe, or add an entry with its source to "
           f"src/rocmft/plan/models.yaml")
    return _raise(file, key, f"model `{name}` {where}", f"{hint + '; ' if hint else ''}{how}")


def _raise(file: str, key: str, message: str, suggestion: str) -> ModelSpec:
    raise ProblemReport([Problem(file, key, message, suggestion)])
