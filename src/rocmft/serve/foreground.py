"""A server in the foreground, whatever runs it (a process, a container): wait until it answers, print where,
show its request log, and on Ctrl-C/SIGTERM stop it and clean up.

The model's loading chatter (hundreds of lines of config and INFO) goes to a log file only; once the server
answers, its lines (requests, errors) go to the terminal as well. VERBOSE=1 shows everything. A server
that dies before it answers gets the last lines of its log and the log's path.
"""

from __future__ import annotations

import collections
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from ..io.safe_text import for_terminal
from . import ports
from .plan import ServePlan

TAIL_LINES = 30
STOP_WAIT_S = 15


class Handle(Protocol):
    def chunks(self) -> Iterable[bytes]: ...  # the server's output until it ends
    def alive(self) -> bool: ...
    def stop(self, kill: bool) -> None: ...  # SIGTERM (graceful), or SIGKILL
    def wait(self, timeout: float | None) -> int | None: ...  # exit code, None on timeout
    def cleanup(self) -> None: ...  # nothing left behind (process, container)


class Pump(threading.Thread):
    """Copies the server's output to its log, and to the terminal once `show` is set."""

    def __init__(self, chunks: Iterable[bytes], log_path: Path, show: bool):
        super().__init__(daemon=True)
        self.source, self.log_path, self.show = chunks, log_path, show
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.hide_once = ""  # the access-log line of our own readiness probe: not the user's request

    def run(self) -> None:
        pending = b""
        with open(self.log_path, "ab") as log:
            try:
                for chunk in self.source:
                    log.write(chunk)
                    log.flush()
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        self._line(line)
            except Exception as exc:  # a container's log stream can end with a connection error
                self.tail.append(f"(log stream ended: {exc})")
            if pending:
                self._line(pending)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self.tail.append(text)
        if self.hide_once and self.hide_once in text:
            self.hide_once = ""
            return
        if self.show:
            print(text, flush=True)


def serve(plan: ServePlan, handle: Handle, log_path: Path, *, ready_lines: Callable[[], list[str]],
          verbose: bool = False, say: Callable[[str], None] | None = None,
          probe: Callable[[str], bool] = ports.answers) -> int:
    """Run until the server ends or a signal asks it to. 0 when stopped by Ctrl-C/SIGTERM. `probe(ready_url)`:
    True once it is our server that answers (`ports.proves_ready` for the API)."""
    say = say or (lambda text: print(for_terminal(f"[rocmft] {text}"), flush=True))  # names from the run dir
    stopping: list[int] = []
    stoppers: list[threading.Thread] = []

    first: list[float] = []

    def on_signal(signum, _frame):
        stopping.append(signum)
        first.append(first[0] if first else time.monotonic())
        # A second signal kills, unless it came with the first: `kill -TERM -<make's group>` reaches us
        # directly and again through make, which forwards SIGTERM to its children.
        kill = len(stopping) > 1 and time.monotonic() - first[0] > 1.0
        # A thread, not the handler: the main thread may be inside a blocking SDK call.
        thread = threading.Thread(target=handle.stop, args=(kill,), daemon=True)
        stoppers.append(thread)
        thread.start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ready, code = False, None
    pump = Pump(handle.chunks(), log_path, show=verbose)
    pump.hide_once = f"GET {urllib.parse.urlsplit(plan.ready_url).path}?" if plan.kind == "api" else ""
    try:
        pump.start()
        ready = ports.wait_ready(plan.ready_url, handle.alive, lambda: bool(stopping), probe=probe)
        if ready:
            for line in ready_lines():
                say(line)
            pump.show = True
        asked_at = None
        while code is None:
            code = handle.wait(1.0)
            if code is None and stopping:
                asked_at = asked_at or time.monotonic()
                if time.monotonic() - asked_at > STOP_WAIT_S:
                    handle.stop(True)  # it ignored SIGTERM: the user asked it to stop
    finally:
        if handle.alive():
            handle.stop(False)
            if handle.wait(STOP_WAIT_S) is None:
                handle.stop(True)
                handle.wait(5)
        for thread in stoppers:
            thread.join(timeout=STOP_WAIT_S)
        handle.cleanup()
        pump.join(timeout=5)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopping:
        say(f"stopped ({signal.Signals(stopping[0]).name}); nothing is listening on port {plan.port} any more")
        return 0
    if not ready:
        for line in pump.tail:
            print(line, file=sys.stderr)
        say(f"the server exited with code {code} before it answered: {log_path}")
        return code or 1
    say(f"the server exited with code {code}; its log: {log_path}")
    return code
