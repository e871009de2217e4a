"""What a model is, read from its config.json: the decoder's shapes, its experts, its layer types, a vision tower.

Field names are those of transformers 5.6's configuration classes (config.json spells them the same):
- dense decoders (llama, mistral, qwen2, qwen3, gemma3_text, ...): hidden_size, intermediate_size, num_hidden_layers,
  num_attention_heads, num_key_value_heads, head_dim, vocab_size, tie_word_embeddings, attention_bias;
- mixture-of-experts: the routed experts per MoE layer (`num_experts`: qwen2_moe, qwen3_moe, qwen3_next;
  `num_local_experts`: mixtral, gpt_oss, llama4_text), the router's top-k (`num_experts_per_tok`), each expert's
  width (`moe_intermediate_size`, else `intermediate_size`: mixtral, gpt_oss, llama4_text), shared experts
  (`shared_expert_intermediate_size`; llama4's shared expert is `intermediate_size` wide, its dense layers
  `intermediate_size_mlp`), which layers are MoE (`decoder_sparse_step` + `mlp_only_layers`; llama4 `moe_layers` /
  `interleave_moe_layer_step`); gpt_oss' experts and router carry biases and its attention one sink per head;
- `layer_types` per layer: full_attention; sliding_attention (a window of `sliding_window` tokens: gpt_oss, gemma3);
  chunked_attention (llama4, `attention_chunk_size`); linear_attention (qwen3_next, qwen3_5: Gated DeltaNet) is
  refused: its state and kernels are not modelled, and costing it as softmax attention would be wrong;
- a multimodal wrapper (gemma3: `text_config` + `vision_config`): planned on its language model, the vision tower
  (SigLIP: siglip_vision_model) and the projector counted as frozen weights.
transformers 5.6 keeps every MoE family's routed experts as 3D parameters (Qwen3MoeExperts.gate_up_proj [E, 2i, h],
GptOssExperts, MixtralExperts, Llama4TextExperts), not nn.Linear modules: LLaMA-Factory's `lora_target: all`
(model_utils/misc.py find_all_linear_modules: every module whose class name holds "Linear") adapts attention, the
dense MLPs and shared experts, never a routed expert; nor does bitsandbytes quantise them (it replaces nn.Linear).
tests/unit/plan/test_plan_architecture.py builds each family on the meta device with transformers and checks the
counts here against its parameters and LLaMA-Factory's find_all_linear_modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..io.problems import Problem, ProblemReport

REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# transformers' Gemma/Gemma2/Gemma3 configs default to tied embeddings; the Llama/Qwen/Mistral ones do not.
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text")
# Defaults of the configuration classes for keys a published config.json may leave out.
_DEFAULTS = {
    "gemma3_text": {"head_dim": 256, "vocab_size": 262_208, "sliding_window": 4096, "sliding_window_pattern": 6},
    "gpt_oss": {"head_dim": 64, "sliding_window": 128, "attention_bias": True},
    "llama4_text": {"head_dim": 128, "attention_chunk_size": 8192, "no_rope_layer_interval": 4,
                    "interleave_moe_layer_step": 1},
    "qwen3_next": {"head_dim": 256, "full_attention_interval": 4},
    "qwen3_5_text": {"head_dim": 256, "full_attention_interval": 4},
    "qwen3_5_moe_text": {"head_dim": 256, "full_attention_interval": 4},
}
# LLaMA-Factory 0.9.5 marks each family's MoE block a ZeRO-3 leaf module (model/model_utils/moe.py
# add_z3_leaf_module): DeepSpeed gathers the whole block, router and every expert, when the block is entered.
ZERO3_LEAF = {"qwen3_moe": "Qwen3MoeSparseMoeBlock", "qwen2_moe": "Qwen2MoeSparseMoeBlock", "gpt_oss": "GptOssMLP",
              "mixtral": "MixtralSparseMoeBlock", "llama4_text": "Llama4TextMoe", "qwen3_next": "Qwen3NextSparseMoeBlock"}
# Families whose configs name a language model with another model_type inside (text_config.model_type).
_TEXT_TYPES = {"llama4": "llama4_text", "gemma3": "gemma3_text", "qwen3_5": "qwen3_5_text",
               "qwen3_5_moe": "qwen3_5_moe_text"}
_MIXTURE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention")


@dataclass(frozen=True)
class Linear:
    """An nn.Linear of the decoder layers, by the name LoRA targets (`lora_target: q_proj`)."""
    name: str
    in_features: int
    out_features: int
    layers: int  # decoder layers that hold it
    bias: bool = False

    @property
    def params(self) -> int:
        return self.layers * (self.in_features * self.out_features + (self.out_features if self.bias else 0))


@dataclass(frozen=True)
class Experts:
    count: int  # routed experts per MoE layer
    top_k: int  # experts each token is routed to
    intermediate_size: int  # one expert's width
    layers: int  # MoE layers
    params_each: int  # one routed expert's weights (+ biases)
    router: int  # router weights (+ bias) per MoE layer
    shared_intermediate: int = 0  # a shared expert every token runs (an nn.Linear MLP: LoRA reaches it)
    leaf: str = ""  # the block LLaMA-Factory makes a ZeRO-3 leaf; "" when it makes none

    @property
    def routed_params(self) -> int:
        return self.layers * (self.count * self.params_each + self.router)

    @property
    def block_params(self) -> int:
        """One MoE layer's router and routed experts: what ZeRO-3 gathers at once when the block is a leaf."""
        return self.count * self.params_each + self.router


def _int(cfg: Mapping[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def needed_keys_text() -> str:
    return ", ".join(REQUIRED_KEYS) + " (and num_key_value_heads, head_dim, tie_word_embeddings when the model has them)"


def language_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """(the language model's config, the vision tower's config or None). A multimodal wrapper keeps the language
    model under text_config (gemma3, llama4, mistral3) or an older name."""
    cfg = dict(config)
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else None
    for nested in ("text_config", "language_config", "llm_config"):
        inner = cfg.get(nested)
        if isinstance(inner, Mapping) and ("hidden_size" not in cfg or nested == "text_config"):
            merged = {**{k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}, **inner}
            outer = str(cfg.get("model_type") or "")
            merged["model_type"] = str(inner.get("model_type") or _TEXT_TYPES.get(outer, outer))
            if "tie_word_embeddings" not in inner and "tie_word_embeddings" in cfg:
                merged["tie_word_embeddings"] = cfg["tie_word_embeddings"]
            return merged, vision
    return cfg, vision


def layer_types(cfg: Mapping[str, Any], model_type: str, layers: int) -> tuple[str, ...]:
    """Each layer's attention, as the config states it or as its configuration class derives it (__post_init__)."""
    given = cfg.get("layer_types")
    if isinstance(given, list) and given:
        return tuple(str(t) for t in given)
    d = _DEFAULTS.get(model_type, {})
    if model_type == "gemma3_text":
        pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or d["sliding_window_pattern"])
        return tuple("sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers))
    if model_type == "gpt_oss":
        return tuple("sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers))
    if model_type == "llama4_text":
        nope = cfg.get("no_rope_layers") or [int((i + 1) % int(cfg.get("no_rope_layer_interval")
                                                               or d["no_rope_layer_interval"]) != 0) for i in range(layers)]
        return tuple("chunked_attention" if n else "full_attention" for n in nope)
    if model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):  # Gated DeltaNet between full layers
        every = int(cfg.get("full_attention_interval") or d["full_attention_interval"])
        return tuple("linear_attention" if (i + 1) % every else "full_attention" for i in range(layers))
    if cfg.get("use_sliding_window") and _int(cfg, "sliding_window"):  # qwen2/qwen3 with the window switched on
        return ("sliding_attention",) * layers
    return ("full_attention",) * layers


def window(cfg: Mapping[str, Any], model_type: str, kinds: tuple[str, ...]) -> int | None:
    if "chunked_attention" in kinds:
        return _int(cfg, "attention_chunk_size") or _DEFAULTS["llama4_text"]["attention_chunk_size"]
    if "sliding_attention" in kinds:
        return _int(cfg, "sliding_window") or _DEFAULTS.get(model_type, {}).get("sliding_window")
    return None


def moe_layers(cfg: Mapping[str, Any], model_type: str, layers: int) -> list[int]:
    """The indices of the MoE layers (each family's modeling code: Qwen3MoeDecoderLayer, Llama4TextDecoderLayer)."""
    if model_type == "llama4_text":
        given = cfg.get("moe_layers")
        if isinstance(given, list):
            return [int(i) for i in given]
        step = int(cfg.get("interleave_moe_layer_step") or 1)
        return list(range(step - 1, layers, step))
    dense = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    return [i for i in range(layers) if i not in dense and (i + 1) % step == 0]


def experts(cfg: Mapping[str, Any], model_type: str, h: int, layers: int) -> Experts | None:
    key = next((k for k in _MIXTURE_KEYS if _int(cfg, k)), None)
    if key is None:
        return None
    count = int(cfg[key])
    top_k = _int(cfg, "num_experts_per_tok") or _int(cfg, "experts_per_token") or 1
    width = _int(cfg, "moe_intermediate_size") or int(cfg["intermediate_size"])
    biased = model_type == "gpt_oss"
    each = 3 * h * width + ((2 * width + h) if biased else 0)  # gate+up [h, 2i], down [i, h] (+ their biases)
    router = count * h + (count if biased else 0)
    shared = _int(cfg, "shared_expert_intermediate_size") or 0
    if model_type == "llama4_text":
        shared = int(cfg["intermediate_size"])
    return Experts(count=count, top_k=top_k, intermediate_size=width, layers=len(moe_layers(cfg, model_type, layers)),
                   params_each=each, router=router, shared_intermediate=shared, leaf=ZERO3_LEAF.get(model_type, ""))


def vision_tower(vision: Mapping[str, Any] | None, text_hidden: int, model_type: str) -> tuple[int, str]:
    """(weights of the vision tower + projector, a note when they are not counted). SigLIP (Gemma 3's):
    transformers' SiglipVisionTransformer (patch conv + position embeddings, encoder layers of q/k/v/out with biases,
    two LayerNorms and fc1/fc2, a post LayerNorm; no pooling head: vision_use_head false), then
    Gemma3MultiModalProjector (mm_input_projection_weight [vision h, text h] + an RMSNorm of vision h)."""
    if vision is None:
        return 0, ""
    kind = str(vision.get("model_type") or "")
    if kind != "siglip_vision_model":
        return 0, f"its vision tower ({kind or 'unknown type'}) is not counted: only SigLIP towers are modelled"
    h, i, n = int(vision.get("hidden_size", 768)), int(vision.get("intermediate_size", 3072)), int(vision.get("num_hidden_layers", 12))
    patch, image, chans = int(vision.get("patch_size", 16)), int(vision.get("image_size", 224)), int(vision.get("num_channels", 3))
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    embed = chans * patch * patch * h + h + (image // patch) ** 2 * h
    head = 0
    if vision.get("vision_use_head", True) is not False:  # attention-pooling head (probe, MHA, LayerNorm, MLP)
        head = h + 3 * h * h + 3 * h + h * h + h + 2 * h + (h * i + i) + (i * h + h)
    projector = h * text_hidden + h if model_type in ("gemma3", "gemma3_text") else 0
    return n * layer + embed + 2 * h + head + projector, ""


UNPLANNED = "not planned: `make train` starts it unchecked; `make bench` measures its memory and speed"


def _refuse(file: str, key: str, message: str, suggestion: str) -> ProblemReport:
    return ProblemReport([Problem(file, key, message, suggestion)])


def check_modelled(name: str, cfg: Mapping[str, Any], kinds: tuple[str, ...], file: str, key: str) -> None:
    """One line for an architecture the planner cannot cost: never planned as something it is not."""
    other = sorted({k for k in kinds if k not in ATTENTION_KINDS})
    if other:
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in (*other, "full_attention") if kinds.count(k))
        raise _refuse(file, key, f"`{name}` is a hybrid model: {counts} layers (layer_types); the planner models "
                      f"softmax attention only and will not cost {'/'.join(other)} layers as full attention",
                      UNPLANNED)
    if _int(cfg, "kv_lora_rank") or _int(cfg, "q_lora_rank"):
        raise _refuse(file, key, f"`{name}` uses multi-head latent attention (kv_lora_rank, DeepSeek-style): not "
                      "modelled by the planner", UNPLANNED)
