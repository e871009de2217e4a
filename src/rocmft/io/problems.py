"""Problems the user can act on: one line each, all reported together.

Every check in the project (recipe loading, rendering, validation, planning, launching) reports through
`Problem`; a step that found any raises `ProblemReport` holding all of them, so a user fixes a file once
instead of once per mistake.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable

from .safe_text import one_line

# Exit code for invalid input (bad recipe, bad file, bad argument): distinct from a failed job (1).
EXIT_INVALID = 2


@dataclass(frozen=True)
class Problem:
    file: str  # what the user edits (recipe, rendered YAML, JSON); "" when it is a command-line value
    key: str  # dotted key or argument name; "" when the whole file is at fault
    message: str
    suggestion: str = ""
    severity: str = "error"  # "error" stops; "warning" and "note" are printed and let the run go on

    def line(self) -> str:
        where = ": ".join(part for part in (self.file, self.key) if part)
        text = f"{where}: {self.message}" if where else self.message
        if self.suggestion:
            text += f" ({self.suggestion})"
        prefix = {"warning": "warning: ", "note": "note: "}.get(self.severity, "error: ")
        return prefix + one_line(text)  # one line per problem, whatever a value quoted in it holds


@dataclass
class ProblemReport(Exception):
    problems: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(p.line() for p in self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def raise_if_errors(problems: Iterable[Problem]) -> list[Problem]:
    """Raise when any problem is an error; otherwise hand back the warnings for the caller to print."""
    problems = list(problems)
    if any(p.severity == "error" for p in problems):
        raise ProblemReport(problems)
    return problems


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """'did you mean `x`?' for the closest candidate, or '' when nothing is close."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.75)
    return f"did you mean `{close[0]}`?" if close else ""
