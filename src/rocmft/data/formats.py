"""The three dataset formats: how to recognise a row, check it, and register the file with LLaMA-Factory.

- alpaca:   {"instruction", "input"?, "output", "system"?, "history"?: [[user, assistant], ...]}
- sharegpt: {"conversations": [{"from": "human"|"gpt"|..., "value"}], "system"?}
- messages: {"messages": [{"role": "system"|"user"|"assistant", "content"}]}  (OpenAI style)

A check raises `BadRow(reason, detail)`; a good row returns (turns, characters). The checks are written
for speed (a million rows must validate faster than the posts' json.loads + json.dumps loop): plain
loops, `type(x) is str`, no allocation on the good path.
"""

from __future__ import annotations

from typing import Any

FORMATS = ("alpaca", "sharegpt", "messages")

# Why a row was rejected: the reason names written to the rejects file and counted in the summary.
REASONS = {
    "invalid_utf8": "bytes that are not UTF-8, or an escaped lone surrogate (\\ud800) that no UTF-8 file can hold",
    "nul_byte": "a NUL character, raw or escaped as \\u0000",
    "invalid_json": "the line is not valid JSON",
    "not_an_object": "valid JSON, but not an object {...}",
    "line_too_long": "a line longer than the limit (--max-line-mb), skipped without being read whole",
    "unknown_format": "an object with none of instruction/output, conversations or messages",
    "mixed_format": "a row in another format than the rest of the file",
    "missing_field": "a required field is absent",
    "wrong_type": "a field has the wrong type (e.g. a number where a string belongs)",
    "empty_content": "an empty or whitespace-only text, or no turns at all",
    "unknown_role": "a turn whose role is not one the format knows",
    "bad_turn_order": "turns do not alternate user/assistant after an optional first system turn",
    "last_turn_not_assistant": "the last turn is not the assistant's: there is nothing to learn",
    "inconsistent_type": "a column whose type differs from earlier rows (LLaMA-Factory's loader fails the whole file on it)",
}


class BadRow(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def detect(obj: dict) -> str | None:
    """The format a row is written in, or None. Checked in this order: a row with `conversations` is
    sharegpt even when it also has alpaca-looking keys."""
    if "conversations" in obj:
        return "sharegpt"
    if "messages" in obj:
        return "messages"
    if "instruction" in obj or "output" in obj:
        return "alpaca"
    return None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class Columns:
    """Types of the columns a format does not define (`id`, `source`, per-turn `weight`...), first seen
    wins. pyarrow, under LLaMA-Factory's loader, fixes a column's type from the first rows and fails the
    whole dataset on a later row that differs, so such a row is rejected here instead."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[str, int]] = {}

    def check(self, where: str, key: str, value: Any, line: int) -> None:
        if value is None:
            return
        kind = _type_name(value)
        slot = f"{where}{key}"
        seen = self.types.get(slot)
        if seen is None:
            self.types[slot] = (kind, line)
        elif seen[0] != kind:
            raise BadRow("inconsistent_type", f"`{slot}` is {_a(kind)} here but {_a(seen[0])} on line {seen[1]}")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _text(value: Any, what: str) -> int:
    """Length of a required non-empty string, or BadRow."""
    if type(value) is not str:
        if value is None:
            raise BadRow("missing_field", f"{what} is null")
        raise BadRow("wrong_type", f"{what} must be a string, got {_a(_type_name(value))}")
    if not value or value.isspace():
        raise BadRow("empty_content", f"{what} is empty")
    return len(value)


# ---------------------------------------------------------------- alpaca

ALPACA_KEYS = frozenset(("instruction", "input", "output", "system", "history"))


def check_alpaca(obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
    if "instruction" not in obj:
        raise BadRow("missing_field", "`instruction` is missing")
    if "output" not in obj:
        raise BadRow("missing_field", "`output` is missing")
    instruction = obj["instruction"]
    if type(instruction) is not str:
        if instruction is None:
            raise BadRow("missing_field", "`instruction` is null")
        raise BadRow("wrong_type", f"`instruction` must be a string, got {_a(_type_name(instruction))}")
    chars = len(instruction)
    query = obj.get("input")
    if query is not None:
        if type(query) is not str:
            raise BadRow("wrong_type", f"`input` must be a string, got {_a(_type_name(query))}")
        chars += len(query)
        seen.add("input")
    if (not instruction or instruction.isspace()) and (not query or query.isspace()):
        raise BadRow("empty_content", "`instruction` and `input` are both empty: there is no prompt")
    chars += _text(obj["output"], "`output`")
    turns = 2
    if "system" in obj and obj["system"] is not None:
        chars += _text(obj["system"], "`system`")
        seen.add("system")
    history = obj.get("history")
    if history is not None:
        if type(history) is not list:
            raise BadRow("wrong_type", f"`history` must be a list of [instruction, output] pairs, got {_a(_type_name(history))}")
        for i, pair in enumerate(history, 1):
            if type(pair) is not list or len(pair) != 2:
                raise BadRow("wrong_type", f"`history` item {i} must be a pair [instruction, output]")
            chars += _text(pair[0], f"`history` item {i} instruction") + _text(pair[1], f"`history` item {i} output")
        turns += 2 * len(history)
        seen.add("history")
    if len(obj) > 2:
        for key in obj:
            if key not in ALPACA_KEYS:
                columns.check("", key, obj[key], line)
    return turns, chars


def alpaca_turns(obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
    turns: list[tuple[str, str]] = []
    for user, assistant in obj.get("history") or ():
        turns += [("user", user), ("assistant", assistant)]
    prompt = "\n".join(part for part in (obj["instruction"], obj.get("input")) if part)
    turns += [("user", prompt), ("assistant", obj["output"])]
    return obj.get("system") or None, turns


# ---------------------------------------------------------------- sharegpt and messages

class _Chat:
    """A list of turns under `key`, each a dict with `role_key`/`content_key`."""

    def __init__(self, name: str, key: str, role_key: str, content_key: str,
                 user: tuple[str, ...], assistant: tuple[str, ...], system: str, hint: str) -> None:
        self.name, self.key, self.role_key, self.content_key = name, key, role_key, content_key
        self.user, self.assistant, self.system = user, assistant, system
        self.roles = (*user, *assistant, system)
        self.hint = hint
        self.turn_keys = frozenset((role_key, content_key))
        self.row_keys = frozenset((key, "system"))

    def check(self, obj: dict, columns: Columns, line: int, seen: set) -> tuple[int, int]:
        turns = obj[self.key]
        if type(turns) is not list or not turns:
            self._explain(turns)
        role_key, content_key, user, assistant = self.role_key, self.content_key, self.user, self.assistant
        chars = 0
        expect_user = True
        extras = False
        # The good path only: any turn that is not plainly right sends the row to _explain, which walks
        # it again slowly and names the first fault with its turn number.
        for turn in turns:
            if type(turn) is not dict:
                self._explain(turns)
            content = turn.get(content_key)
            if type(content) is not str or not content or content.isspace():
                self._explain(turns)
            chars += len(content)
            if len(turn) > 2:
                extras = True
            role = turn.get(role_key)
            if expect_user:
                if role in user:
                    expect_user = False
                    continue
            elif role in assistant:
                expect_user = True
                continue
            if role != self.system or turn is not turns[0]:
                self._explain(turns)
        if not expect_user:
            self._explain(turns)
        count = len(turns) - (turns[0].get(role_key) == self.system)
        if not count:
            self._explain(turns)
        if extras:
            for turn in turns:
                if len(turn) > 2:
                    for key in turn:
                        if key not in self.turn_keys:
                            columns.check(f"{self.key}[].", key, turn[key], line)
        if len(obj) > 1:
            system = obj.get("system")
            if system is not None:
                chars += _text(system, "`system`")
                seen.add("system")
            for key in obj:
                if key not in self.row_keys:
                    columns.check("", key, obj[key], line)
        return count, chars

    def _explain(self, turns: Any) -> None:
        """Raise BadRow for the first fault of a row the fast loop did not accept."""
        key, role_key, content_key = self.key, self.role_key, self.content_key
        if type(turns) is not list:
            if turns is None:
                raise BadRow("missing_field", f"`{key}` is null")
            raise BadRow("wrong_type", f"`{key}` must be a list of turns, got {_a(_type_name(turns))}")
        if not turns:
            raise BadRow("empty_content", f"`{key}` has no turns")
        expect_user = True
        for i, turn in enumerate(turns, 1):
            if type(turn) is not dict:
                raise BadRow("wrong_type", f"turn {i} must be an object with `{role_key}` and `{content_key}`, got {_a(_type_name(turn))}")
            role = turn.get(role_key)
            content = turn.get(content_key)
            if role is None or content is None:
                missing = role_key if role is None else content_key
                hint = ""
                if self.name == "sharegpt" and "role" in turn:
                    hint = " (role/content turns are the messages format: name the list `messages`)"
                elif self.name == "messages" and "from" in turn:
                    hint = " (from/value turns are the sharegpt format: name the list `conversations`)"
                raise BadRow("missing_field", f"turn {i} has no `{missing}`{hint}")
            if type(role) is not str:
                raise BadRow("wrong_type", f"turn {i} `{role_key}` must be a string, got {_a(_type_name(role))}")
            if type(content) is not str:
                raise BadRow("wrong_type", f"turn {i} `{content_key}` must be a string, got {_a(_type_name(content))}")
            if role not in self.roles:
                raise BadRow("unknown_role", f"turn {i} has {role_key} `{role}`; {self.hint}")
            if not content or content.isspace():
                raise BadRow("empty_content", f"turn {i} ({role}) is empty")
            if role == self.system:
                if i == 1:
                    continue
                raise BadRow("bad_turn_order", f"turn {i} is `{role}`: a system turn may only come first")
            if (role in self.user) != expect_user:
                want = "/".join(self.user if expect_user else self.assistant)
                raise BadRow("bad_turn_order", f"turn {i} is `{role}`, expected `{want}`")
            expect_user = not expect_user
        if len(turns) == 1 and turns[0].get(role_key) == self.system:
            raise BadRow("empty_content", "only a system turn: no user or assistant turns")
        if not expect_user:
            raise BadRow("last_turn_not_assistant", f"the last turn (turn {len(turns)}) is `{turns[-1][role_key]}`, not the assistant's")
        raise BadRow("bad_turn_order", "turns do not alternate user/assistant")  # not reached: the fast loop agrees

    def turns(self, obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
        system = obj.get("system") or None
        out = []
        for turn in obj[self.key]:
            role = turn[self.role_key]
            if role == self.system:
                system = turn[self.content_key]
            else:
                out.append(("user" if role in self.user else "assistant", turn[self.content_key]))
        return system, out


SHAREGPT = _Chat("sharegpt", "conversations", "from", "value",
                 user=("human", "observation"), assistant=("gpt", "function_call"), system="system",
                 hint="sharegpt knows human, gpt, system, observation, function_call")
MESSAGES = _Chat("messages", "messages", "role", "content",
                 user=("user",), assistant=("assistant",), system="system",
                 hint="messages knows system, user, assistant")

CHECKS = {"alpaca": check_alpaca, "sharegpt": SHAREGPT.check, "messages": MESSAGES.check}
TURNS = {"alpaca": alpaca_turns, "sharegpt": SHAREGPT.turns, "messages": MESSAGES.turns}
# The key whose presence makes a row belong to the format (alpaca: either of two).
MARKERS = {"alpaca": ("instruction", "output"), "sharegpt": ("conversations",), "messages": ("messages",)}


def entry(fmt: str, file_name: str, seen: set) -> dict[str, Any]:
    """The dataset_info.json entry LLaMA-Factory reads: `formatting`, `columns`, `tags`.

    Once `columns` (or `tags`) is given LLaMA-Factory sets every column it does not name to None, so an
    optional column is named only when some row has it (a named column absent from the file fails)."""
    if fmt == "alpaca":
        columns = {"prompt": "instruction"}
        if "input" in seen:
            columns["query"] = "input"
        columns["response"] = "output"
        for name in ("system", "history"):
            if name in seen:
                columns[name] = name
        return {"file_name": file_name, "formatting": "alpaca", "columns": columns}
    chat = SHAREGPT if fmt == "sharegpt" else MESSAGES
    columns = {"messages": chat.key}
    if "system" in seen:
        columns["system"] = "system"
    tags = {"role_tag": chat.role_key, "content_tag": chat.content_key,
            "user_tag": chat.user[0], "assistant_tag": chat.assistant[0]}
    if fmt == "sharegpt":
        tags["observation_tag"] = chat.user[1]
        tags["function_tag"] = chat.assistant[1]
    tags["system_tag"] = chat.system
    return {"file_name": file_name, "formatting": "sharegpt", "columns": columns, "tags": tags}


def bad_strings(value: Any) -> str | None:
    """'nul_byte' / 'invalid_utf8' when a string anywhere in the value holds NUL or a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "nul_byte"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "invalid_utf8"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None
