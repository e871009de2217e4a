"""Supervised rows (stage `sft`) in their three layouts, and the pieces the preference and KTO rows reuse.

- alpaca:   {"instruction", "input"?, "output", "system"?, "history"?: [[user, assistant], ...]}
- sharegpt: {"conversations": [{"from": "human"|"gpt"|..., "value"}], "system"?}
- messages: {"messages": [{"role": "system"|"user"|"assistant", "content"}]}  (OpenAI style)
"""

from __future__ import annotations

from typing import Any

from .rowcheck import BadRow, Columns, a, required, text, type_name

# ---------------------------------------------------------------- alpaca

ALPACA_KEYS = frozenset(("instruction", "input", "output", "system", "history"))


def alpaca_prompt(obj: dict, seen: set) -> tuple[int, int]:
    """The prompt side of an alpaca row (instruction, input, system, history): (turns, characters)."""
    instruction = required(obj, "instruction")
    if type(instruction) is not str:
        if instruction is None:
            raise BadRow("missing_field", "`instruction` is null")
        raise BadRow("wrong_type", f"`instruction` must be a string, got {a(type_name(instruction))}")
    chars = len(instruction)
    query = obj.get("input")
    if query is not None:
        if type(query) is not str:
            raise BadRow("wrong_type", f"`input` must be a string, got {a(type_name(query))}")
        chars += len(query)
        seen.add("input")
    if (not instruction or instruction.isspace()) and (not query or query.isspace()):
        raise BadRow("empty_content", "`instruction` and `input` are both empty: there is no prompt")
    if "system" in obj and obj["system"] is not None:
        chars += text(obj["system"], "`system`")
        seen.add("system")
    turns = 1
    history = obj.get("history")
    if history is not None:
        if type(history) is not list:
            raise BadRow("wrong_type", f"`history` must be a list of [instruction, output] pairs, got {a(type_name(history))}")
        for i, pair in enumerate(history, 1):
            if type(pair) is not list or len(pair) != 2:
                raise BadRow("wrong_type", f"`history` item {i} must be a pair [instruction, output]")
            chars += text(pair[0], f"`history` item {i} instruction") + text(pair[1], f"`history` item {i} output")
        turns += 2 * len(history)
        seen.add("history")
    return turns, chars


def check_alpaca(obj: dict, columns: Columns, line: int, seen: set, known: frozenset = ALPACA_KEYS) -> tuple[int, int]:
    required(obj, "instruction")
    required(obj, "output")
    turns, chars = alpaca_prompt(obj, seen)
    chars += text(obj["output"], "`output`")
    if len(obj) > 2:
        columns.extras(obj, known, line)
    return turns + 1, chars


def alpaca_prompt_turns(obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
    turns: list[tuple[str, str]] = []
    for user, assistant in obj.get("history") or ():
        turns += [("user", user), ("assistant", assistant)]
    turns.append(("user", "\n".join(part for part in (obj["instruction"], obj.get("input")) if part)))
    return obj.get("system") or None, turns


def alpaca_turns(obj: dict) -> tuple[str | None, list[tuple[str, str]]]:
    system, turns = alpaca_prompt_turns(obj)
    return system, turns + [("assistant", obj["output"])]


# ---------------------------------------------------------------- sharegpt and messages

class Chat:
    """A list of turns under `key`, each a dict with `role_key`/`content_key`."""

    def __init__(self, name: str, key: str, role_key: str, content_key: str,
                 user: tuple[str, ...], assistant: tuple[str, ...], system: str, hint: str) -> None:
        self.name, self.key, self.role_key, self.content_key = name, key, role_key, content_key
        self.user, self.assistant, self.system = user, assistant, system
        self.roles = (*user, *assistant, system)
        self.hint = hint
        self.turn_keys = frozenset((role_key, content_key))
        self.row_keys = frozenset((key, "system"))

    def walk(self, turns: Any, columns: Columns, line: int, ends_on_user: bool = False) -> tuple[int, int]:
        """(turns, characters) of a turn list that alternates user/assistant after an optional system turn
        and ends on the assistant's turn (a supervised row) or on the user's (the prompt of a pair)."""
        if type(turns) is not list or not turns:
            self._explain(turns, ends_on_user)
        role_key, content_key, user, assistant = self.role_key, self.content_key, self.user, self.assistant
        chars = 0
        expect_user = True
        extras = False
        # The good path only: any turn that is not plainly right sends the row to _explain, which walks
        # it again slowly and names the first fault with its turn number.
        for turn in turns:
            if type(turn) is not dict:
                self._explain(turns, ends_on_user)
            content = turn.get(content_key)
            if type(content) is not str or not content or content.isspace():
                self._explain(turns, ends_on_user)
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
                self._explain(turns, ends_on_user)
        if expect_user == ends_on_user:
            self._explain(turns, ends_on_user)
        count = len(turns) - (turns[0].get(role_key) == self.system)
        if not count:
            self._explain(turns, ends_on_user)
        if extras:
            for turn in turns:
                if len(turn) > 2:
                    for key in turn:
                        if key not in self.turn_keys:
                            columns.check(f"{self.key}[].", key, turn[key], line)
        return count, chars

    def row_columns(self, obj: dict, columns: Columns, line: int, seen: set, known: frozenset) -> int:
        """The row's own columns besides the turns: `system` (its characters), and the extras' types."""
        chars = 0
        system = obj.get("system")
        if system is not None:
            chars = text(system, "`system`")
            seen.add("system")
        columns.extras(obj, known, line)
        return chars

    def check(self, obj: dict, columns: Columns, line: int, seen: set, known: frozenset | None = None) -> tuple[int, int]:
        count, chars = self.walk(obj[self.key], columns, line)
        if len(obj) > 1:
            chars += self.row_columns(obj, columns, line, seen, known or self.row_keys)
        return count, chars

    def _explain(self, turns: Any, ends_on_user: bool) -> None:
        """Raise BadRow for the first fault of a row the fast loop did not accept."""
        key, role_key, content_key = self.key, self.role_key, self.content_key
        if type(turns) is not list:
            if turns is None:
                raise BadRow("missing_field", f"`{key}` is null")
            raise BadRow("wrong_type", f"`{key}` must be a list of turns, got {a(type_name(turns))}")
        if not turns:
            raise BadRow("empty_content", f"`{key}` has no turns")
        expect_user = True
        for i, turn in enumerate(turns, 1):
            if type(turn) is not dict:
                raise BadRow("wrong_type", f"turn {i} must be an object with `{role_key}` and `{content_key}`, got {a(type_name(turn))}")
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
                raise BadRow("wrong_type", f"turn {i} `{role_key}` must be a string, got {a(type_name(role))}")
            if type(content) is not str:
                raise BadRow("wrong_type", f"turn {i} `{content_key}` must be a string, got {a(type_name(content))}")
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
        last = f"the last turn (turn {len(turns)}) is `{turns[-1][role_key]}`"
        if ends_on_user and expect_user:
            raise BadRow("last_turn_not_user", f"{last}: the prompt of a pair must end on the user's turn, "
                         "which `chosen` and `rejected` answer")
        if not ends_on_user and not expect_user:
            raise BadRow("last_turn_not_assistant", f"{last}, not the assistant's")
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

    def tags(self) -> dict[str, str]:
        """The dataset_info.json `tags` LLaMA-Factory reads the turns with."""
        tags = {"role_tag": self.role_key, "content_tag": self.content_key,
                "user_tag": self.user[0], "assistant_tag": self.assistant[0]}
        if len(self.user) > 1:
            tags["observation_tag"] = self.user[1]
            tags["function_tag"] = self.assistant[1]
        tags["system_tag"] = self.system
        return tags


SHAREGPT = Chat("sharegpt", "conversations", "from", "value",
                user=("human", "observation"), assistant=("gpt", "function_call"), system="system",
                hint="sharegpt knows human, gpt, system, observation, function_call")
MESSAGES = Chat("messages", "messages", "role", "content",
                user=("user",), assistant=("assistant",), system="system",
                hint="messages knows system, user, assistant")
CHATS = {"sharegpt": SHAREGPT, "messages": MESSAGES}


def alpaca_columns(seen: set, *answer: tuple[str, str]) -> dict[str, str]:
    """`columns` of an alpaca entry: the prompt, the answer column(s), and the optional ones some row has.

    Once `columns` (or `tags`) is given LLaMA-Factory sets every column it does not name to None, so an
    optional column is named only when some row has it (a named column absent from the file fails)."""
    columns = {"prompt": "instruction"}
    if "input" in seen:
        columns["query"] = "input"
    columns.update(answer)
    for name in ("system", "history"):
        if name in seen:
            columns[name] = name
    return columns


def chat_entry(layout: str, file_name: str, seen: set, *extra: tuple[str, str], ranking: bool = False) -> dict[str, Any]:
    chat = CHATS[layout]
    columns = {"messages": chat.key}
    if "system" in seen:
        columns["system"] = "system"
    columns.update(extra)
    entry: dict[str, Any] = {"file_name": file_name, "formatting": "sharegpt"}
    if ranking:
        entry["ranking"] = True
    return {**entry, "columns": columns, "tags": chat.tags()}


def entry(layout: str, file_name: str, seen: set) -> dict[str, Any]:
    if layout == "alpaca":
        return {"file_name": file_name, "formatting": "alpaca", "columns": alpaca_columns(seen, ("response", "output"))}
    return chat_entry(layout, file_name, seen)
