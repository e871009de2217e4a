"""Preference pairs (stage `dpo`: DPO, ORPO, SimPO; and `rm`): a prompt with a preferred and a rejected answer.

- alpaca-preference:   {"instruction", "input"?, "chosen": "...", "rejected": "...", "system"?, "history"?}
- sharegpt-preference: {"conversations": [... ending on a `human` turn], "chosen": {"from": "gpt", "value"},
                        "rejected": {"from": "gpt", "value"}, "system"?}
- messages-preference: {"messages": [... ending on a `user` turn], "chosen": {"role": "assistant", "content"},
                        "rejected": {...}}

These are the shapes LLaMA-Factory's converters read with `ranking: true` (data/converter.py): alpaca
takes `chosen`/`rejected` as strings; sharegpt/openai take them as one turn each, whose role must be the
assistant's, after a prompt with an odd number of turns. A pair whose two answers are the same text
teaches nothing (its DPO gradient is zero) and is rejected.
"""

from __future__ import annotations

from typing import Any

from .rowcheck import BadRow, Columns, a, required, text, type_name
from .sft import CHATS, Chat, alpaca_columns, alpaca_prompt, alpaca_prompt_turns, chat_entry

ALPACA_KEYS = frozenset(("instruction", "input", "chosen", "rejected", "system", "history"))
WHY = {"chosen": " (the preferred answer)", "rejected": " (the answer to prefer less)"}


def _same(chosen: str, rejected: str) -> None:
    if chosen.strip() == rejected.strip():
        raise BadRow("chosen_equals_rejected", "`chosen` and `rejected` are the same text: the pair prefers nothing")


def check_alpaca(obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
    turns, chars = alpaca_prompt(obj, seen)
    chosen, rejected = required(obj, "chosen", WHY["chosen"]), required(obj, "rejected", WHY["rejected"])
    chars += text(chosen, "`chosen`") + text(rejected, "`rejected`")
    _same(chosen, rejected)
    columns.extras(obj, ALPACA_KEYS, line)
    return turns + 1, chars


def _answer(chat: Chat, obj: dict, key: str) -> str:
    """One answer turn of a chat pair: a dict with the assistant's role and a non-empty content."""
    turn = required(obj, key, WHY[key])
    role_key, content_key = chat.role_key, chat.content_key
    shape = f'{{"{role_key}": "{chat.assistant[0]}", "{content_key}": "..."}}'
    if type(turn) is not dict:
        if turn is None:
            raise BadRow("missing_field", f"`{key}` is null")
        raise BadRow("wrong_type", f"`{key}` must be one turn {shape}, got {a(type_name(turn))}")
    role = turn.get(role_key)
    if role is None:
        raise BadRow("missing_field", f"`{key}` has no `{role_key}`")
    if role not in chat.assistant:
        if role in chat.roles:
            raise BadRow("bad_turn_order", f"`{key}` is a `{role}` turn: it must be the assistant's ({'/'.join(chat.assistant)})")
        raise BadRow("unknown_role", f"`{key}` has {role_key} `{role}`; {chat.hint}")
    content = turn.get(content_key)
    if content is None:
        raise BadRow("missing_field", f"`{key}` has no `{content_key}`")
    text(content, f"`{key}` {content_key}")
    return content


def _chat_check(chat: Chat):
    known = chat.row_keys | {"chosen", "rejected"}

    def check(obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
        count, chars = chat.walk(obj[chat.key], columns, line, ends_on_user=True)
        chosen, rejected = _answer(chat, obj, "chosen"), _answer(chat, obj, "rejected")
        _same(chosen, rejected)
        chars += len(chosen) + len(rejected) + chat.row_columns(obj, columns, line, seen, known)
        return count + 1, chars

    return check


def _longer(chosen: str, rejected: str) -> str:
    """The answer that sets the pair's length: LLaMA-Factory truncates both to the longer one's budget."""
    return chosen if len(chosen) >= len(rejected) else rejected


def alpaca_turns(obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
    system, turns = alpaca_prompt_turns(obj)
    return system, turns + [("assistant", _longer(obj["chosen"], obj["rejected"]))]


def _chat_turns(chat: Chat):
    def turns(obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
        system, prompt = chat.turns(obj)
        answer = _longer(obj["chosen"][chat.content_key], obj["rejected"][chat.content_key])
        return system, prompt + [("assistant", answer)]

    return turns


CHECKS = {"alpaca": check_alpaca, **{name: _chat_check(chat) for name, chat in CHATS.items()}}
TURNS = {"alpaca": alpaca_turns, **{name: _chat_turns(chat) for name, chat in CHATS.items()}}


def entry(layout: str, file_name: str, seen: set) -> dict[str, Any]:
    pair = (("chosen", "chosen"), ("rejected", "rejected"))
    if layout == "alpaca":
        return {"file_name": file_name, "formatting": "alpaca", "ranking": True, "columns": alpaca_columns(seen, *pair)}
    return chat_entry(layout, file_name, seen, *pair, ranking=True)
