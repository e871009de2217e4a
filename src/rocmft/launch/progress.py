"""What a person sees while a job runs, the same for every runtime (local, Docker, Slurm --wait).

Progress comes from the events the job writes (`<run dir>/progress.jsonl`, followed by a thread a few times a
second), never from its text. The text (which the runtime writes to train.log in full) is fed here only to
pick what a person should see of it: the project's own `[rocmft]` lines; with `verbose`, all of it.

    with Watch(run_dir, verbose=...) as watch:
        for chunk in job_output:
            log.write(chunk)
            watch.feed(chunk)
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TextIO

from ..run.events import EventFile
from . import joblog
from .terminal import Display

POLL_S = 0.25


class Watch:
    def __init__(self, run_dir: Path, out: TextIO | None = None, *, verbose: bool = False, quiet: bool = False,
                 live: bool | None = None, log_name: str = "train.log"):
        self.run_dir = Path(run_dir)
        self.out = out if out is not None else sys.stdout
        self.verbose, self.quiet = verbose and not quiet, quiet
        self.live = live
        self.log_name = log_name
        self.events = EventFile(self.run_dir)
        self.lines = joblog.Lines()
        self.display: Display | None = None
        self.warnings = 0
        self.steps_seen = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Watch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        if not self.quiet:
            self.display = Display(self.out, live=self.live, verbose=self.verbose)
        self._thread = threading.Thread(target=self._follow, name="rocmft-progress", daemon=True)
        self._thread.start()

    def feed(self, chunk: bytes) -> None:
        self._show(self.lines.feed(chunk), self.lines.raw)

    def close(self) -> None:
        self._show(self.lines.flush(), self.lines.raw)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._poll()  # the last events, written just before the job ended
        if self.display is not None:
            self.display.close()
            if self.warnings and not self.verbose:
                self.display.line(f"[rocmft] the job printed {self.warnings} warning line(s): see "
                                  f"{self.run_dir / self.log_name} (VERBOSE=1 streams the job's output)")

    # ------------------------------------------------------------
    def _show(self, lines: list[str], raw: bytes) -> None:
        if self.verbose and self.display is not None and raw:
            self.display.raw(raw)
        for line in lines:
            text = joblog.strip_bars(line)
            self.warnings += joblog.is_warning(text)
            if self.display is not None and not self.verbose and joblog.is_project_line(text):
                self.display.line(text)

    def _poll(self) -> None:
        for event in self.events.poll():
            self.steps_seen += event.get("event") == "step"
            if self.display is not None:
                self.display.event(event)

    def _follow(self) -> None:
        while not self._stop.wait(POLL_S):
            self._poll()
