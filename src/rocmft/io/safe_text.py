"""Text from outside (a user's file, a recipe's name, what a job wrote in its run dir) put where another reader
parses lines: a comment in a YAML file we write, a line on the user's terminal. A newline there would end the
comment and start a real key; an escape sequence would drive the terminal (retitle it, rewrite what is shown,
on some terminals answer back). Such characters are shown as escapes, never passed on."""

from __future__ import annotations

import re

# C0 and C1 controls and DEL, and the characters YAML (and Unicode) read as line breaks: NEL, LS, PS.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# The same, less the newline and tab of ordinary multi-line text.
TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match) -> str:
    char = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def one_line(value: object) -> str:
    """`value` as text that stays on one line: every control or line-break character written as an escape."""
    return CONTROL.sub(_escape, str(value))


def for_terminal(value: object) -> str:
    """`value` for the user's terminal: lines and tabs kept, escape sequences and other controls shown as text."""
    return TERMINAL_CONTROL.sub(_escape, str(value))


def has_control(value: str) -> bool:
    return bool(CONTROL.search(value))
