"""A model's architecture (the config.json numbers the planner needs) and its parameter counts.

Where it comes from, first match wins:
1. the recipe's `plan.model:` block (the architecture written inline, for a model nobody has locally);
2. a local model dir (`model_name_or_path` relative to the project root, or absolute) with a config.json;
3. the Hugging Face cache on this machine (`$HF_HUB_CACHE`, `$HF_HOME/hub`, ~/.cache/huggingface/hub);
4. the table in models.yaml next to this file (published configs, source noted per entry);
5. a config.json read from the Hub before (.cache/hub-configs/, with its address and commit), else read now when
   online (io/hubhttp: that one small file, never the weights; HF_HUB_OFFLINE=1 reads nothing).
Only JSON/YAML is read: no transformers. What the config means (experts, layer types, a vision tower): architecture.py.
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

from ..io import hubcache, hubhttp, paths
from ..io.problems import Problem, ProblemReport, did_you_mean
from . import architecture as arch
from .architecture import Experts, Linear, needed_keys_text

TABLE_FILE = Path(__file__).with_name("models.yaml")
REQUIRED_KEYS = arch.REQUIRED_KEYS
# Every LoRA target a Llama/Qwen/Mistral decoder layer has; LLaMA-Factory's `lora_target: all` means all of them
# (every nn.Linear except lm_head: llamafactory/model/model_utils/misc.py find_all_linear_modules). A model's own
# list is ModelSpec.linear_names (MoE models: no routed expert is an nn.Linear).
LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # where the numbers came from: a file path or a URL
    hidden_size: int
    intermediate_size: int  # the dense MLP's width (MoE models: of their dense layers, if any)
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    head_dim: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    model_type: str = ""
    experts: Experts | None = None
    layer_types: tuple[str, ...] = ()  # per layer: full_attention | sliding_attention | chunked_attention
    window: int | None = None  # tokens a sliding/chunked layer attends to
    vision_params: int = 0  # a multimodal wrapper's vision tower + projector (frozen)
    notes: tuple[str, ...] = ()  # what the plan should say about how it read the model

    # ------------------------------------------------------------ shapes
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts is not None

    @property
    def dense_layers(self) -> int:
        return self.num_hidden_layers - (self.experts.layers if self.experts else 0)

    @cached_property
    def linears(self) -> tuple[Linear, ...]:
        """Every nn.Linear of the decoder layers (what LoRA `all` adapts and bitsandbytes quantises)."""
        h, i, L = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        o_bias = self.attention_bias and self.model_type not in QKV_BIAS_ONLY
        out = [Linear("q_proj", h, self.q_dim, L, self.attention_bias), Linear("k_proj", h, self.kv_dim, L, self.attention_bias),
               Linear("v_proj", h, self.kv_dim, L, self.attention_bias), Linear("o_proj", self.q_dim, h, L, o_bias)]
        e = self.experts
        if self.dense_layers:
            out += [Linear("gate_proj", h, i, self.dense_layers), Linear("up_proj", h, i, self.dense_layers),
                    Linear("down_proj", i, h, self.dense_layers)]
        if e is not None and e.shared_intermediate:
            s = e.shared_intermediate
            out += [Linear("gate_proj", h, s, e.layers), Linear("up_proj", h, s, e.layers), Linear("down_proj", s, h, e.layers)]
            if self.model_type in ("qwen2_moe", "qwen3_next"):
                out.append(Linear("shared_expert_gate", h, 1, e.layers))
        return tuple(out)

    @property
    def linear_names(self) -> tuple[str, ...]:
        """What `lora_target: all` adapts in this model, in a stable order."""
        return tuple(dict.fromkeys(x.name for x in self.linears))

    def of(self, names) -> list[Linear]:
        wanted = set(names)
        return [x for x in self.linears if x.name in wanted]

    def lora_params(self, names, rank: int) -> int:
        return sum(x.layers * rank * (x.in_features + x.out_features) for x in self.of(names))

    def adapter_inputs(self, names) -> float:
        """Input features of the adapted linears, per token per layer on average (the adapters' saved inputs)."""
        return sum(x.layers * x.in_features for x in self.of(names)) / self.num_hidden_layers

    def distinct_adapter_inputs(self, names) -> float:
        """Distinct tensors the adapted linears read, per token per layer on average: the attention's input once
        (q/k/v), the MLP's input once (gate/up, shared-expert gate), down_proj's input; o_proj's input is the
        attention output, which the attention kernel keeps anyway (counted there)."""
        chosen, L = self.of(names), self.num_hidden_layers
        qkv = self.hidden_size if any(x.name in ("q_proj", "k_proj", "v_proj") for x in chosen) else 0
        mlp_in = max((x.layers for x in chosen if x.name in ("gate_proj", "up_proj", "shared_expert_gate")), default=0)
        down = sum(x.layers * x.in_features for x in chosen if x.name == "down_proj")
        return qkv + (self.hidden_size * mlp_in + down) / L

    def largest_linear(self) -> Linear:
        return max(self.linears, key=lambda x: x.in_features * x.out_features)

    # ------------------------------------------------------------ parameter counts
    @cached_property
    def linear_params(self) -> int:
        """Weights (+ biases) of every decoder-layer nn.Linear: what 4/8-bit quantization quantizes."""
        return sum(x.params for x in self.linears)

    @property
    def layer_norm_params(self) -> int:
        """Norms (and attention sinks) of one decoder layer."""
        h, d = self.hidden_size, self.head_dim
        if self.model_type in ("qwen3", "qwen3_moe"):
            return 2 * h + 2 * d  # + q_norm, k_norm
        if self.model_type == "gemma3_text":
            return 4 * h + 2 * d  # input, post-attention, pre- and post-feedforward norms + q_norm, k_norm
        if self.model_type == "gpt_oss":
            return 2 * h + self.num_attention_heads  # + one attention sink per head
        return 2 * h

    @cached_property
    def decoder_params(self) -> int:
        routed = self.experts.routed_params if self.experts else 0
        return self.linear_params + routed + self.num_hidden_layers * self.layer_norm_params

    @property
    def layer_params(self) -> float:
        """One decoder layer's parameters, on average over the layers (every expert included)."""
        return self.decoder_params / self.num_hidden_layers

    @property
    def embed_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def head_params(self) -> int:
        """lm_head weights stored separately (0 when tied to the embeddings)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @cached_property
    def total_params(self) -> int:
        return (self.decoder_params + self.embed_params + self.head_params + self.hidden_size  # + the final norm
                + self.vision_params)

    @cached_property
    def active_params(self) -> int:
        """Parameters one token uses: all but the routed experts it is not sent to (Qwen's "activated" count;
        OpenAI's for gpt-oss leaves the input embeddings out)."""
        e = self.experts
        unused = e.layers * (e.count - e.top_k) * e.params_each if e else 0
        return self.total_params - unused - self.vision_params

    @cached_property
    def layer_linear_params(self) -> float:
        """Weights one token multiplies in one decoder layer, on average over the layers (attention, dense MLP or the
        router, its top-k experts and the shared expert): N per layer of the FLOPs model."""
        e = self.experts
        routed = e.layers * (e.router + e.top_k * e.params_each) if e else 0
        return (self.linear_params + routed) / self.num_hidden_layers

    @property
    def matmul_params(self) -> float:
        """Parameters that take part in a matmul per token: decoder linears, active experts + the lm_head."""
        return self.num_hidden_layers * self.layer_linear_params + self.vocab_size * self.hidden_size

    @property
    def mlp_width(self) -> float:
        """The MLP intermediate width one token runs per layer, on average (top-k experts + shared on MoE layers)."""
        e = self.experts
        if e is None:
            return float(self.intermediate_size)
        moe = e.top_k * e.intermediate_size + e.shared_intermediate
        return (self.dense_layers * self.intermediate_size + e.layers * moe) / self.num_hidden_layers

    @property
    def largest_layer_param(self) -> int:
        """Elements of a decoder layer's largest single parameter (ZeRO-3 sub-groups close at a parameter
        boundary): a routed-expert tensor holds every expert (gate_up_proj [E, 2i, h])."""
        e = self.experts
        fused = e.count * 2 * e.intermediate_size * self.hidden_size if e else 0
        return max(fused, max(x.in_features * x.out_features for x in self.linears))

    def layers_of(self, kind: str) -> int:
        return (self.layer_types or ("full_attention",) * self.num_hidden_layers).count(kind)

    def params_text(self) -> str:
        """"30.53 B total, 3.35 B active" for a MoE model, else the count."""
        total = f"{self.total_params / 1e9:.2f} B"
        if self.experts:
            return f"{total} total, {self.active_params / 1e9:.2f} B active"
        return total


# ---------------------------------------------------------------- building a spec

# Families whose q/k/v projections carry biases and o_proj none, whatever attention_bias says: Qwen2Attention
# hard-codes bias=True (its config.json has no such key), Qwen2MoeAttention takes `qkv_bias` (default true).
QKV_BIAS_ONLY = ("qwen2", "qwen2_moe")


def _qkv_bias(cfg: Mapping[str, Any], model_type: str) -> bool:
    if model_type == "qwen2":
        return True
    if model_type == "qwen2_moe":
        return bool(cfg.get("qkv_bias", True))
    return bool(cfg.get("attention_bias", False))


def from_config(name: str, config: Mapping[str, Any], source: str, file: str = "", key: str = "model_name_or_path") -> ModelSpec:
    """A spec from a config.json-like mapping (architecture.py says how each family is read)."""
    cfg, vision = arch.language_config(config)
    model_type = str(cfg.get("model_type") or "")
    for k, v in arch._DEFAULTS.get(model_type, {}).items():
        cfg.setdefault(k, v)
    missing = [k for k in REQUIRED_KEYS if not isinstance(cfg.get(k), int) or isinstance(cfg.get(k), bool) or cfg[k] <= 0]
    if missing:
        raise ProblemReport([Problem(file, key, f"the architecture of `{name}` ({source}) lacks {', '.join(missing)}",
                                     f"the planner needs {needed_keys_text()}")])
    layers = int(cfg["num_hidden_layers"])
    kinds = arch.layer_types(cfg, model_type, layers)
    arch.check_modelled(name, cfg, kinds, file, key)
    heads = int(cfg["num_attention_heads"])
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    tied = cfg.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in arch._TIED_BY_DEFAULT
    hidden = int(cfg["hidden_size"])
    experts = arch.experts(cfg, model_type, hidden, layers)
    dense_width = int(cfg.get("intermediate_size_mlp") or cfg["intermediate_size"]) if model_type == "llama4_text" \
        else int(cfg["intermediate_size"])
    vision_params, vision_note = arch.vision_tower(vision, hidden, str(config.get("model_type") or model_type))
    return ModelSpec(
        name=name, source=source,
        hidden_size=hidden, intermediate_size=dense_width,
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=int(kv), vocab_size=int(cfg["vocab_size"]), head_dim=int(head_dim),
        tie_word_embeddings=bool(tied), attention_bias=_qkv_bias(cfg, model_type),
        model_type=model_type, experts=experts,
        layer_types=kinds if any(k != "full_attention" for k in kinds) else (), window=arch.window(cfg, model_type, kinds),
        vision_params=vision_params, notes=(vision_note,) if vision_note else (),
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


def _hub_config(name: str, file: str, key: str, env: Mapping[str, str]) -> ModelSpec | hubhttp.Config | None:
    """A config.json read from the Hub: kept in .cache/hub-configs/ (with its address and commit) and read again
    from there, offline too; otherwise fetched now when the Hub may be asked (None when it may not; the Hub's
    answer when it had none)."""
    if not hubcache.looks_like_repo_id(name) or "/" not in name:
        return None
    folder = paths.cache_dir() / "hub-configs" / hubcache.repo_folder(name)
    kept, about = folder / "config.json", folder / "source.json"
    if kept.is_file() and about.is_file():
        where = json.loads(about.read_text(encoding="utf-8"))
        source = f"{where.get('url')} (commit {where.get('commit') or '?'}, read {where.get('read', '?')}; kept in {kept})"
        return from_config(name, _read_config(kept, file, key), source, file, key)
    if hubcache.offline(env):
        return None
    got = hubhttp.config_json(name, env)
    if got.data is None:
        return got
    spec = from_config(name, got.data, f"{got.url} (commit {got.commit or '?'})", file, key)  # refusals before keeping
    from datetime import date

    folder.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(got.data, indent=1) + "\n", encoding="utf-8")
    about.write_text(json.dumps({"url": got.url, "commit": got.commit, "read": date.today().isoformat()}) + "\n",
                     encoding="utf-8")
    return spec


# A `did you mean` stays within a family and never crosses between mixture-of-experts and dense: a model's family
# and kind are told from its name (the unknown one has no config to read), a table entry's from its model_type.
_FAMILIES = (("gpt_oss", r"gpt-oss"), ("mixtral", r"mixtral"), ("llama4", r"llama-4"), ("gemma3", r"gemma-3"),
             ("qwen3", r"qwen3(?![.-]?(5|6|next|vl|omni))"), ("qwen2", r"qwen2"), ("llama", r"llama"),
             ("mistral", r"mistral|ministral"))
# "-A3B" (active parameters; a mistyped last letter too: "-A3C"), "MoE", "8x7B", llama4's "-16E"
_MOE_NAME = r"-a\d+(\.\d+)?[a-z]?(\b|-)|moe|\d+x\d+b|-\d+e\b|gpt-oss|mixtral|scout|maverick"
_TYPE_FAMILY = {"qwen3_moe": "qwen3", "qwen2_moe": "qwen2", "gemma3_text": "gemma3", "llama4_text": "llama4"}


def name_kind(name: str) -> tuple[str, bool]:
    """(family, mixture-of-experts) as a model's name says them; family "" when the name does not tell."""
    import re

    base = name.lower().rsplit("/", 1)[-1]
    family = next((f for f, pattern in _FAMILIES if re.search(pattern, base)), "")
    return family, bool(re.search(_MOE_NAME, base))


def did_you_mean_same_kind(name: str) -> str:
    family, moe = name_kind(name)
    if not family:
        return ""
    same = []
    for candidate in table_names():
        spec = from_table(candidate)
        if spec is not None and _TYPE_FAMILY.get(spec.model_type, spec.model_type) == family and spec.is_moe == moe:
            same.append(candidate)
    return did_you_mean(name, same)


def resolve(name: str, inline: Mapping[str, Any] | None = None, *, file: str = "",
            key: str = "llamafactory.model_name_or_path", env: Mapping[str, str] | None = None) -> ModelSpec:
    """The architecture of `model_name_or_path`, or a ProblemReport saying which keys are needed and where."""
    env = os.environ if env is None else env
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
    found = _hub_config(name, file, key, env)
    if isinstance(found, ModelSpec):
        return found
    looks_local = name.startswith((".", "/", "~")) or name.count("/") != 1
    where = "is not a local dir" + ("" if looks_local else ", not in the Hugging Face cache") + " and not in the model table"
    if found is not None:
        where = where.replace(" and not", ", not") + f", and {found.problem}"
    elif not looks_local and hubcache.offline(env):
        where += " (HF_HUB_OFFLINE=1: its config.json is not read from the Hub)"
    how = (f"the planner needs {needed_keys_text()} from the model's config.json: put the model dir (with config.json) "
           f"at `{name}`, or write those keys under `plan: model:` in the recipe, or add an entry with its source to "
           f"src/rocmft/plan/models.yaml")
    hints = (did_you_mean_same_kind(name), found.fix if found is not None else "", how)
    return _raise(file, key, f"model `{name}` {where}", "; ".join(h for h in hints if h))


def _raise(file: str, key: str, message: str, suggestion: str) -> ModelSpec:
    raise ProblemReport([Problem(file, key, message, suggestion)])
