"""Turns the job's output into progress: steps from the progress bar, loss from the Trainer's log dicts.

Shared by every runtime that streams logs (local, Docker). Pure: feed text, get events back.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_STEP = re.compile(r"(\d+)/(\d+) \[")
_DICT = re.compile(r"\{'loss': [^}]*\}")


@dataclass
class Progress:
    step: int | None = None
    total: int | None = None
    loss: float | None = None
    grad_norm: float | None = None

    def line(self) -> str:
        parts = []
        if self.step is not None:
            parts.append(f"step {self.step}/{self.total}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.grad_norm is not None:
            parts.append(f"grad_norm {self.grad_norm:.3g}")
        return ", ".join(parts)


def _number(value) -> float | None:
    # transformers 5 prints the log values as strings ('6.671')
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class ProgressParser:
    def __init__(self) -> None:
        self.state = Progress()

    def feed(self, text: str) -> Progress | None:
        """Returns the progress when a new loss was logged (the moment worth a status line)."""
        for match in _STEP.finditer(text):
            self.state.step, self.state.total = int(match.group(1)), int(match.group(2))
        found = None
        for match in _DICT.finditer(text):
            try:
                logs = ast.literal_eval(match.group(0))
            except (ValueError, SyntaxError):
                continue  # nan/inf printed bare are not Python literals; the watchdog reports those
            self.state.loss = _number(logs.get("loss"))
            self.state.grad_norm = _number(logs.get("grad_norm"))
            found = self.state
        return found


def failed_ranks(log_text: str) -> list[str]:
    """torchrun's failure summary -> 'rank 1 (local_rank 1) on host: exit code -9 (killed by SIGKILL), root cause'.

    The root cause (the first rank to fail) comes first; the others were usually stopped because of it.
    """
    import signal

    summary = log_text[log_text.rfind("Failures:"):] if "Failures:" in log_text else log_text
    root_at = summary.find("Root Cause")
    out = []
    for block in re.finditer(r"\[\d+\]:\n((?:\s+\w[\w ]*:.*\n?)+)", summary):
        fields = dict(re.findall(r"^\s+(\w[\w ]*?)\s*:\s*(.*)$", block.group(1), re.M))
        rank = re.match(r"(\d+) \(local_rank: (\d+)\)", fields.get("rank", ""))
        code = re.match(r"(-?\d+)", fields.get("exitcode", ""))
        if not rank or not code:
            continue
        code_i = int(code.group(1))
        what = f"exit code {code_i}"
        if code_i < 0:
            try:
                what += f" (killed by {signal.Signals(-code_i).name})"
            except ValueError:
                pass
        is_root = root_at != -1 and block.start() > root_at
        line = f"rank {rank.group(1)} (local_rank {rank.group(2)}) on {fields.get('host', '?')}: {what}"
        if is_root:
            out.insert(0, line + ", root cause")
        elif not any(o.startswith(line) for o in out):
            out.append(line)
    return out


class Echo:
    """Echoes a job's output to the terminal with a `[rocmft] step ..., loss ...` line after each logged loss.

    Whole lines only (up to the last newline or carriage return of what has arrived), so a status line never
    lands inside a line or a multi-byte character. Every runtime that streams output uses this one.
    """

    MAX_PENDING = 1 << 20  # a progress bar without a newline for this long is echoed anyway

    def __init__(self, out, quiet: bool = False):
        self.out = out
        self.quiet = quiet
        self.parser = ProgressParser()
        self.pending = b""

    def feed(self, chunk: bytes) -> None:
        self.pending += chunk
        cut = max(self.pending.rfind(b"\n"), self.pending.rfind(b"\r")) + 1
        if cut == 0 and len(self.pending) < self.MAX_PENDING:
            return
        cut = cut or len(self.pending)
        done, self.pending = self.pending[:cut], self.pending[cut:]
        self._emit(done)

    def flush(self) -> None:
        if self.pending:
            done, self.pending = self.pending, b""
            self._emit(done)

    def _emit(self, data: bytes) -> None:
        progress = self.parser.feed(data.decode("utf-8", "replace"))
        if self.quiet:
            return
        self.out.buffer.write(data)
        self.out.flush()
        if progress:
            print(f"[rocmft] {progress.line()}", file=self.out, flush=True)
