"""What a test run started, found by marks it leaves, never by name: other people's tests run on this machine
at the same time, with the same commands, images and labels.

- Processes carry an environment variable (`Mark`): every process a test starts inherits it, including the
  servers a launcher puts in a session of their own and the Slurm job steps (sbatch --export=ALL), so even
  one that outlived its parent is found in /proc.
- Containers are ours when they point into this run's temporary folder (a label value or a mount source)
  or carry this checkout's path as `ai.rocmft.project`, and were created after the run began.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

SESSION_VAR = "PYTEST_ROCMFT_SESSION"  # set for the whole test run (tests/conftest.py)
TEST_VAR = "PYTEST_ROCMFT_TEST"  # set by `process_mark` for what one test starts (servers, browsers)


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":  # exited, not yet reaped: nothing runs
                return []
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except (OSError, IndexError):
        return []


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


@dataclass(frozen=True)
class Mark:
    var: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, self.var: self.token}

    def alive(self) -> list[int]:
        """Running processes that carry this mark, this test process excluded."""
        needle = f"{self.var}={self.token}".encode()
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid() and needle in _environ(int(name)):
                found.append(int(name))
        return found

    def stop(self, timeout: float = 20) -> list[str]:
        """SIGTERM every marked process, SIGKILL what is left after `timeout`; returns what was running."""
        pids = self.alive()
        seen = [f"{pid}: {command_line(pid)}" for pid in pids]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout
            while (pids := self.alive()) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not pids:
                break
        return seen


def command_lines_until_exit(proc, mark: Mark, every: float = 0.05) -> set[tuple[int, str]]:
    """(pid, command line) of every process carrying `mark`, sampled until `proc` ends: what `ps` showed every
    local user of the processes a test started (a pid is seen again after an exec changes its line)."""
    seen: set[tuple[int, str]] = set()
    while proc.poll() is None:
        for pid in mark.alive():
            seen.add((pid, command_line(pid)))
        time.sleep(every)
    return seen


def ours(container, since: datetime, tmp_root: str, project: str) -> bool:
    """`tmp_root` ends with a slash: /tmp/pytest-of-root/pytest-12/ is no prefix of another run's pytest-123."""
    attrs = container.attrs
    created = datetime.fromisoformat(attrs["Created"][:26].rstrip("Z") + "+00:00") if attrs.get("Created") else since
    if created < since:
        return False
    labels = attrs.get("Config", {}).get("Labels") or {}
    if labels.get("ai.rocmft.project") == project or any(tmp_root in str(v) for v in labels.values()):
        return True
    return any(str(m.get("Source", "")).startswith(tmp_root) for m in attrs.get("Mounts") or [])
