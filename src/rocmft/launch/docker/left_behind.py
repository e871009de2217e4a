"""Containers whose launcher is gone (`make runs`): a crashed or killed launcher never removed them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from .spec import LABEL, RUN_LABEL


@dataclass(frozen=True)
class Leftover:
    name: str
    status: str  # running | exited | created ...
    run: str
    launcher: str  # "pid 123 on host"
    why: str

    @property
    def fix(self) -> str:
        return f"docker rm -f {self.name}"


def labelled(client) -> list[tuple[str, str, Mapping[str, str]]]:
    """(name, state, labels) of every container labelled with a run, running or not. The low-level list: one
    request carrying all three; `containers.list` inspects each container after listing it and fails when one is
    removed in between (another run finishing)."""
    return [(c["Names"][0].lstrip("/"), c["State"], c["Labels"] or {})
            for c in client.api.containers(all=True, filters={"label": RUN_LABEL})]


def leftovers(containers: list[tuple[str, str, Mapping[str, str]]], hostname: str, alive) -> tuple[list[Leftover], dict[str, str]]:
    """Pure: (name, status, labels) of the containers labelled ai.rocmft.run -> (left behind, run -> active
    container). A container is left behind when its launcher is gone: same host and that pid is dead.
    A launcher on another host cannot be judged from here: reported only once its container stopped."""
    left, active = [], {}
    for name, status, labels in containers:
        run = labels.get(RUN_LABEL, "")
        pid, where = labels.get(LABEL + "launcher.pid", ""), labels.get(LABEL + "launcher.host", "")
        launcher = f"pid {pid or '?'} on {where or '?'}"
        if where == hostname and pid.isdigit():
            gone = not alive(int(pid))
            why = "its launcher is gone" if gone else ""
        else:
            gone = status != "running"
            why = f"launcher on another host ({where or '?'}), container {status}" if gone else ""
        if gone:
            left.append(Leftover(name, status, run, launcher, why))
        else:
            active[run] = name
    return left, active


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
