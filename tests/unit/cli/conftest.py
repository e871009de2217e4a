"""`make` run for real with an argv recorder in place of .venv/bin/rocmft and .venv/bin/python (ROCMFT=, PY=):
the exact argv, environment and stdin each target hands the CLI. Make, bash and the setup scripts (already done:
instant) run as they are; only the program at the end is the recorder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def run_make(*args: str, env: dict[str, str], input: str = "") -> subprocess.CompletedProcess:
    """`make -s ARGS` in the project, as a user runs it (not as a sub-make of `make test`: its MAKEFLAGS dropped),
    `input` on its stdin."""
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          input=input)


class MakeRecorder:
    def __init__(self, folder: Path):
        self.log = folder / "argv.jsonl"
        self.program = folder / "recorder"
        self.program.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                # stdin only where the real CLI reads it (the --print-runtime probe must not)
                                f"with open({str(self.log)!r}, 'a') as f:\n"
                                "    stdin = sys.stdin.read() if '--prompt-file=-' in sys.argv else None\n"
                                "    f.write(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ), 'stdin': stdin}) + '\\n')\n")
        self.program.chmod(0o755)

    def make(self, *args: str, env: dict[str, str], input: str = "") -> subprocess.CompletedProcess:
        return run_make(*args, f"ROCMFT={self.program}", f"PY={self.program}", env=env, input=input)

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def last(self, *args: str, env: dict[str, str]) -> list[str]:
        """The argv of the last CLI call `make ARGS` made (the command itself, after any --print-runtime probe)."""
        proc = self.make(*args, env=env)
        assert proc.returncode == 0, proc.stderr
        return self.calls()[-1]["argv"]


@pytest.fixture
def recorder(tmp_path) -> MakeRecorder:
    return MakeRecorder(tmp_path)
