"""Does the recipe's chat `template` fit its model? Asked of LLaMA-Factory where the job's versions are.

Two sources say which template a model was made for, the same two LLaMA-Factory itself uses:
- its model table (llamafactory/extras/constants.py): each chat model it lists (`-Instruct`, `-Chat`, ...) has
  a template, found here by the hub id of any of its download sources; it is what LlamaBoard fills in for the
  model (webui/common.py, DEFAULT_TEMPLATE). Another template is refused: the model would be taught, and then
  prompted by chat and serve, in a format it was not made for.
- the model's own tokenizer, when its files are here (a model folder, or a hub snapshot in the cache) and carry
  a chat template: LLaMA-Factory reads a template from it as it does when none is set
  (data/template.py, `parse_template`). Another template only warns: a base model may be taught any format.
Templates are told apart by what they write around a user's turn (`format_user`, special tokens filled in
from the tokenizer): `qwen`, `qwen3` and `chatml` write the same turn and all fit a Qwen2.5 or Qwen3 model.
A model neither source knows (the tiny test model: no table entry, no chat template) is not judged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io import paths
from ..io.problems import Problem

SUGGESTED = 3  # templates named when several write the tokenizer's turn


def check(args: dict[str, Any], file: str) -> list[Problem]:
    model, name = str(args.get("model_name_or_path") or ""), args.get("template")
    if not model or not isinstance(name, str):
        return []
    from llamafactory.data.template import TEMPLATES

    if name not in TEMPLATES:  # the parser check names the unknown template
        return []
    made_for = _table(model)
    if made_for and not any(_same_turn(TEMPLATES[name], TEMPLATES[t]) for t in made_for if t in TEMPLATES):
        best = min(made_for)
        return [Problem(file, "template", f"`{name}` is not the chat format of {model}: LLaMA-Factory's model table "
                        f"gives `{best}` (extras/constants.py)", f'template: {best}, or SET="template={best}"')]
    tokenizer = None if made_for else _tokenizer(model)
    if tokenizer is None:
        return []
    fitting = _fitting(tokenizer, TEMPLATES)
    if fitting is None or name in fitting:
        return []
    alike = ", ".join(f"`{t}`" for t in fitting[:SUGGESTED]) or "none of LLaMA-Factory's templates"
    return [Problem(file, "template", f"`{name}` writes a user's turn unlike the chat template of {model}'s "
                    f"tokenizer; alike: {alike}", "fine for a base model taught a format of your choice; "
                    + (f'else SET="template={fitting[0]}"' if fitting else "else check the model"),
                    severity="warning")]


def _table(model: str) -> set[str]:
    """The templates LLaMA-Factory's model table gives the models with this hub id (ModelScope's too)."""
    from llamafactory.extras.constants import DEFAULT_TEMPLATE, SUPPORTED_MODELS

    return {DEFAULT_TEMPLATE[n] for n, sources in SUPPORTED_MODELS.items()
            if model in sources.values() and DEFAULT_TEMPLATE.get(n)}


def _tokenizer(model: str):
    """The model's tokenizer when its files are on this machine and carry a chat template, else None."""
    folder = Path(model).expanduser()
    folder = folder if folder.is_absolute() else paths.root() / folder
    if not folder.is_dir():
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "tokenizer_config.json") if model.count("/") == 1 else None
        if not isinstance(found, str):
            return None
        folder = Path(found).parent
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(config, dict) and config.get("chat_template")) and not (folder / "chat_template.jinja").is_file():
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception:  # noqa: BLE001 - a tokenizer that does not load is the parser's and the job's to report
        return None


def _fitting(tokenizer, templates) -> list[str] | None:
    """LLaMA-Factory's templates that write a user's turn as the tokenizer's chat template does; None when
    LLaMA-Factory cannot read that chat template (one that refuses a system turn, say)."""
    from llamafactory.data.template import parse_template

    try:
        parsed = parse_template(tokenizer)
    except Exception:  # noqa: BLE001 - a chat template's own error (raise_exception) means: not judged
        return None
    turn = _turn(parsed, tokenizer)
    return [name for name, t in templates.items() if _turn(t, tokenizer) == turn]


def _same_turn(a, b) -> bool:
    return a.format_user.slots == b.format_user.slots


def _turn(template, tokenizer) -> str:
    """A user's turn as the template writes it, special tokens as the tokenizer spells them."""
    out = []
    for slot in template.format_user.slots:
        if isinstance(slot, str):
            out.append(slot)
        elif isinstance(slot, set):  # {"bos_token"} / {"eos_token"}
            out += [str(getattr(tokenizer, token, "") or "") for token in slot]
        elif isinstance(slot, dict):  # {"token": "<|im_start|>"}
            out.append(str(slot.get("token", "")))
    return "".join(out)
