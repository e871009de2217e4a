"""Generation settings: defaults a person would pick for chatting, overridden by `SET="key=value ..."`.

Checked here, on the host, against the keys LLaMA-Factory's inference parser takes (its
GeneratingArguments and the inference part of ModelArguments/DataArguments; a unit test pins this table
against LLaMA-Factory's own dataclasses), so a typo is one line before any model loads or container starts.
"""

from __future__ import annotations

from typing import Any

from ..io.problems import Problem, did_you_mean, raise_if_errors
from ..io.yamlio import parse_yaml
from ..recipe.overrides import split_set

# LLaMA-Factory's defaults (1024 new tokens, temperature 0.95, top_p 0.7) suit its web demo; for a chat
# with a fine-tune, shorter answers come back sooner and a little less randomness reads better.
DEFAULTS: dict[str, Any] = {"max_new_tokens": 512, "temperature": 0.7, "top_p": 0.9}

# key -> (type, choices). Types are what LLaMA-Factory's dataclass field holds.
KEYS: dict[str, tuple[type, tuple[str, ...]]] = {
    # GeneratingArguments
    "do_sample": (bool, ()), "temperature": (float, ()), "top_p": (float, ()), "top_k": (int, ()),
    "num_beams": (int, ()), "max_length": (int, ()), "max_new_tokens": (int, ()),
    "repetition_penalty": (float, ()), "length_penalty": (float, ()), "skip_special_tokens": (bool, ()),
    # ModelArguments / DataArguments that only matter at inference
    "infer_backend": (str, ("huggingface", "vllm", "sglang")),
    "infer_dtype": (str, ("auto", "float16", "bfloat16", "float32")),
    "use_kv_cache": (bool, ()), "default_system": (str, ()), "enable_thinking": (bool, ()),
    "vllm_maxlen": (int, ()), "vllm_gpu_util": (float, ()), "vllm_enforce_eager": (bool, ()),
    "vllm_max_lora_rank": (int, ()),
}
# What rocmft takes from the run; a SET= of these would chat with something the run did not train.
FROM_RUN = ("model_name_or_path", "adapter_name_or_path", "template", "finetuning_type")


def parse(set_string: str | None) -> dict[str, Any]:
    """DEFAULTS updated by SET=; every bad item reported at once (one line each)."""
    settings = dict(DEFAULTS)
    problems: list[Problem] = []
    for item in split_set(set_string):
        key, sep, raw = item.partition("=")
        if not sep or not key:
            problems.append(Problem("SET", item, "a setting must be key=value, e.g. SET=\"max_new_tokens=128\""))
            continue
        if key in FROM_RUN:
            problems.append(Problem("SET", key, "taken from the run (its train.yaml), not settable here",
                                    "pick another RUN= (or `make export` for a merged model)"))
            continue
        if key not in KEYS:
            problems.append(Problem("SET", key, "not a generation setting LLaMA-Factory takes at inference",
                                    did_you_mean(key, KEYS) or f"one of: {', '.join(sorted(KEYS))}"))
            continue
        value, message = _typed(key, raw)
        if message:
            problems.append(Problem("SET", key, message))
        elif value is None:
            settings.pop(key, None)  # `key=` falls back to LLaMA-Factory's own default
        else:
            settings[key] = value
    raise_if_errors(problems)
    return settings


def _typed(key: str, raw: str) -> tuple[Any, str]:
    kind, choices = KEYS[key]
    if not raw.strip():
        return None, ""
    if kind is str:  # text as written: `default_system=yes` is the word, not YAML's true
        value = raw
    else:
        try:
            value = parse_yaml(raw)
        except Exception:  # not YAML at all: reported as the wrong type below
            value = raw
    if kind is bool:
        if not isinstance(value, bool):
            return None, f"`{raw}` is not true or false"
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"`{raw}` is not a whole number"
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"`{raw}` is not a number"
        value = float(value)
    elif choices and value not in choices:
        return None, f"`{raw}` is not one of: {', '.join(choices)}"
    if key in ("max_new_tokens", "max_length", "num_beams", "top_k") and value < 1:
        return None, f"must be at least 1, got {value}"
    if key == "temperature" and value < 0:
        return None, f"must be >= 0, got {value}"
    if key == "top_p" and not 0 < value <= 1:
        return None, f"must be in (0, 1], got {value}"
    return value, ""
