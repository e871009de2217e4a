"""The user's DeepSpeed JSON against the shipped presets: the nearest preset when it matches in what matters,
else the JSON kept as the recipe's own file. Either way every other difference is listed.

What matters: the ZeRO stage and where optimizer states and weights live (`ds_presets.shape`), and whether the
JSON brings its own `optimizer` or `scheduler` (DeepSpeed's instead of the Trainer's: another training). Each
shipped preset is rendered for the recipe's precision and compared as rendered. Precision is not a choice of
the JSON: a preset renders its bf16/fp16 blocks from `precision:`, and a kept file says "auto" there, which
transformers fills from the rendered YAML - so the two never disagree (a mismatch stops a run at start).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from ..io.problems import Problem
from ..recipe import ds_presets, render
from ..recipe.precision import Precision
from ..validate.deepspeed import TOP_LEVEL_KEYS
from .base import same

OWN_BLOCKS = ("optimizer", "scheduler")
_MISSING = object()


@dataclass
class Match:
    preset: str  # a shipped preset's name; "" when the JSON is kept as the recipe's own file
    kept: dict[str, Any] | None = None  # the JSON to write next to the recipe
    differences: list[str] = field(default_factory=list)


def rendered(name: str, prec: Precision) -> dict[str, Any]:
    text = render.environment().get_template(f"{name}.json.j2").render(bf16=prec.bf16, fp16=prec.fp16)
    return json.loads(text)


def leaves(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """{"zero_optimization.stage": 3, ...}: every value by its dotted path."""
    if not isinstance(cfg, dict) or not cfg:
        return {prefix: cfg} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        out.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _text(value: Any) -> str:
    return "(not set)" if value is _MISSING else json.dumps(value)


def hidden(key: str, refused: dict[str, str] | None) -> str:
    """Why the value at `key` is never printed, "" when it may be: a key DeepSpeed does not read is no setting of
    DeepSpeed's, and its value may be anything (a credential: issue 43, N8). `refused` is None when DeepSpeed's
    config model did not judge the JSON here: then only the keys a shipped preset has are known below the top."""
    parts = key.split(".")
    if parts[0] not in TOP_LEVEL_KEYS:
        return "DeepSpeed does not read this key"
    if refused is None:
        return "" if key in _preset_keys() else "not judged by DeepSpeed's config model here"
    return next((refused[p] for p in (".".join(parts[:i]) for i in range(len(parts), 0, -1)) if p in refused), "")


def _preset_keys() -> set[str]:
    precisions = (Precision("bf16", ""), Precision("fp16", ""))
    return {key for name in ds_presets.shipped() for prec in precisions for key in leaves(rendered(name, prec))}


def differences(user: dict[str, Any], other: dict[str, Any], refused: dict[str, str] | None, target: str) -> list[str]:
    """One line per value that differs: `key: yours -> target's`; fp16's loss scaling only when fp16 is on. A key
    DeepSpeed does not know is named with why, never its value (`hidden`)."""
    a, b = leaves(user), leaves(other)
    fp16_on = any(cfg.get("fp16", {}).get("enabled") not in (False, None) for cfg in (user, other)
                  if isinstance(cfg.get("fp16"), dict))
    lines = []
    for key in [*b, *(k for k in a if k not in b)]:
        if key.startswith("fp16.") and key != "fp16.enabled" and not fp16_on:
            continue  # fp16 is off on both sides: its loss-scaling settings do nothing
        mine, theirs = a.get(key, _MISSING), b.get(key, _MISSING)
        if mine is not _MISSING and theirs is not _MISSING and same(mine, theirs):
            continue
        secret = hidden(key, refused)
        if secret:
            lines.append(f"{key}: (value not shown) -> {'(not set)' if theirs is _MISSING else '(kept)'} in {target} "
                         f"({secret})")
            continue
        lines.append(f"{key}: {_text(mine)} -> {_text(theirs)} in {target}")
    return lines


def refused_keys(problems: list[Problem], ds_label: str) -> dict[str, str]:
    """The JSON's keys DeepSpeed does not know (the source check's problems), with its words."""
    return {p.key: p.message for p in problems
            if p.file == ds_label and p.key and ("unknown DeepSpeed key" in p.message or "does not know" in p.message)}


def match(user: dict[str, Any], prec: Precision, refused: dict[str, str] | None) -> Match:
    """`refused`: the keys DeepSpeed's config model refused, None when it did not judge the JSON here."""
    shape = ds_presets.shape(user)
    own_blocks = [k for k in OWN_BLOCKS if k in user]
    fits = [] if own_blocks else [name for name in ds_presets.shipped()
                                  if ds_presets.shape(rendered(name, prec)) == shape]
    if fits:
        scored = [(len(differences(user, rendered(n, prec), refused, n)), n) for n in fits]
        name = min(scored)[1]
        return Match(name, None, differences(user, rendered(name, prec), refused, f"preset {name}"))
    kept = keep(user, refused)
    why = (f"its own {' and '.join(own_blocks)} block" if own_blocks else
           f"no shipped preset has ZeRO stage {shape[0]} with optimizer offload {shape[1]} and weights offload {shape[2]}")
    return Match("", kept, [f"kept as the recipe's own file: {why}", *differences(user, kept, refused, "the kept file")])


def verbatim(user: dict[str, Any], precision: str) -> Match:
    """KEEP_DS=1: the JSON kept as written (the caller copies its bytes), judged by DeepSpeed's config model when
    the recipe is validated like any other; its bf16/fp16 blocks are the user's to keep in step with `precision:`."""
    return Match("", user, [f"kept byte for byte (KEEP_DS=1): no preset, nothing left out; DeepSpeed's config model "
                            f"judges it as written, and its bf16/fp16 must agree with precision: {precision}"])


def keep(user: dict[str, Any], refused: dict[str, str] | None) -> dict[str, Any]:
    """The user's JSON as the recipe's own: keys DeepSpeed refuses or does not read removed, precision left to the
    YAML ("auto")."""
    kept = {k: copy.deepcopy(v) for k, v in user.items() if k in TOP_LEVEL_KEYS}
    for key in refused or {}:
        node, *path = [kept, *key.split(".")]
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    for section in ("fp16", "bf16"):
        block = kept.get(section) if isinstance(kept.get(section), dict) else {}
        kept[section] = {**block, "enabled": "auto"}
    return kept
