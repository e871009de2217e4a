"""The terminal while a job runs: lines printed once, and on a TTY one live progress line redrawn in place.

On a TTY (a person watching): the project's lines scroll above a single rich line with step/total, a bar,
loss (and a DPO/KTO run's reward accuracy, margin or KL), tokens/s per GPU and ETA, redrawn on every event
and twice a second (so the ETA counts down while a long step runs). Not a TTY (CI, `| tee`, a file): a
plain line per logged step of a short run, about PLAIN_STEP_LINES of a longer one (the first and last step
always, the rest at a steady interval), never a carriage return. With VERBOSE the job's raw output streams
too, so there is no live line to tear apart: steps are plain lines between whole lines of output.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, TextIO

from ..io.safe_text import for_terminal
from ..recipe import stages
from ..run import events

PREFIX = "[rocmft] "
# A piped run (CI, `| tee`, a file) shows this many step lines at most, plus the last: every step of a run this
# short (tiny-cpu's 12), a steady cadence for a longer one (the demo's 60: every 4th), so a piped `make demo`
# stays under 40 lines. The trainer_log and progress.jsonl keep every step; only the terminal skips.
PLAIN_STEP_LINES = 15


class Display:
    def __init__(self, out: TextIO, *, live: bool | None = None, verbose: bool = False):
        self.out = out
        wants_live = _isatty(out) if live is None else live
        self.live = bool(wants_live) and not verbose
        self.last: dict[str, Any] | None = None
        self.stage: str | None = None  # from the job's begin event: a dpo/kto line shows the stage's signals
        self.last_at = 0.0
        self._line_start = True
        self._printed: int | None = None  # the last step a plain line was printed for
        self._next_due = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live = None
        if self.live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=out, force_terminal=True, highlight=False, soft_wrap=False)
            self._live = Live(console=console, get_renderable=self._renderable, auto_refresh=True,
                              refresh_per_second=2, transient=False, redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    # ------------------------------------------------------------ what runtimes call
    def line(self, text: str) -> None:
        """A line printed once (above the live line on a TTY). Its values come from the job's events: an escape
        sequence in one is shown as text, never sent to the terminal."""
        text = for_terminal(text)
        if self._live is not None:
            from rich.text import Text

            self._live.console.print(Text(text), soft_wrap=True)  # Text: "[rocmft]" is not rich markup
            return
        with self._lock:
            # after a bar that ended in a carriage return (VERBOSE), start a line of our own
            print(("" if self._line_start else "\n") + text, file=self.out, flush=True)
            self._line_start = True

    def raw(self, data: bytes) -> None:
        """The job's output as it came (VERBOSE): whole lines only, so a step line never lands inside one."""
        with self._lock:
            self._line_start = data.endswith(b"\n")
            buffer = getattr(self.out, "buffer", None)
            if buffer is not None:
                self.out.flush()
                buffer.write(data)
                buffer.flush()
            else:
                self.out.write(data.decode("utf-8", "replace"))
                self.out.flush()

    def event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "begin":
            self.stage = event.get("stage")
        if event.get("event") != "step":
            return
        self.last, self.last_at = event, time.monotonic()
        if self._live is not None:
            self._live.refresh()
        elif self._due(event):
            self._print_step(event)

    def _due(self, event: dict[str, Any]) -> bool:
        """Plain output: every step of a short run (or one of unknown length); else the first step, then one
        every max_steps / PLAIN_STEP_LINES steps, and the last."""
        step, total = int(event.get("step") or 0), int(event.get("max_steps") or 0)
        if total <= PLAIN_STEP_LINES:
            return True
        return self._printed is None or step >= self._next_due or step >= total

    def _print_step(self, event: dict[str, Any]) -> None:
        step, total = int(event.get("step") or 0), int(event.get("max_steps") or 0)
        self._printed = step
        every = max(1, -(-total // PLAIN_STEP_LINES))
        self._next_due = (step // every + 1) * every  # multiples of `every`: 1, 4, 8, ... 60 for the demo
        self.line(PREFIX + events.step_line(event, self.stage))

    def close(self) -> None:
        if self._live is None and self.last is not None and self._printed != int(self.last.get("step") or 0):
            self._print_step(self.last)  # stopped between two printed steps (Ctrl-C, divergence): its last shows
        if self._live is not None:
            self._live.refresh()
            self._live.stop()  # the final state stays on screen, the summary follows below it
            self._live = None

    # ------------------------------------------------------------ the live line
    def _renderable(self):
        from rich.text import Text

        return Text(for_terminal(self.live_text(time.monotonic())), no_wrap=True, overflow="ellipsis")

    def live_text(self, now: float, width: int = 12) -> str:
        """Fits 80 columns (100 with a stage's own signals, drawn with a shorter bar). The ETA counts down
        between events, so the line moves while a long step runs."""
        e = self.last
        if e is None:
            return f"{PREFIX}starting: model, data and processes ({events.clock(now - self.started)})"
        if stages.SHOWN.get(self.stage or ""):
            width = min(width, 6)
        step, total = int(e.get("step") or 0), int(e.get("max_steps") or 0)
        filled = min(width, int(width * step / total)) if total else 0
        bar = "━" * filled + ("╺" + "─" * (width - filled - 1) if filled < width else "")
        eta = e.get("eta_s")
        left = None if eta is None else max(0.0, eta - (now - self.last_at))
        return "  ".join([f"{PREFIX}step {step}/{total or '?'} {bar}",
                          *events.step_fields(e, brief=True, eta_s=left, stage=self.stage)])


def _isatty(out: TextIO) -> bool:
    """A terminal that can redraw a line: not a pipe or file, and not TERM=dumb (Emacs shells, some CI)."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
