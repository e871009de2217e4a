"""lm-evaluation-harness task names as both jobs check them before any download or model load (`make eval
TASKS=` in rocmft.evaluate.harness_job, `make fetch TASKS=` in rocmft.fetch.worker), where the harness is
installed: one wording for an unknown name, with the harness's closest names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# lm_eval 0.4.13's CLI lists tasks with a subcommand (lm_eval/_cli/ls.py); the older `lm_eval --tasks list` is
# read as a run of a task named "list" there.
LIST_COMMAND = "lm-eval ls tasks"


def unknown(name: str, known: Iterable[str]) -> str:
    """The line for a name the harness does not know (the caller adds its prefix)."""
    close = difflib.get_close_matches(name, sorted(known), n=5, cutoff=0.6)
    hint = f"the harness's closest: {', '.join(close)}" if close else f"`{LIST_COMMAND}` lists them all"
    return f"`{name}` is not an lm-evaluation-harness task or group ({hint})"
