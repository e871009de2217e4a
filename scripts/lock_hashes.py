#!/usr/bin/env python3
"""Write every pin's sha256 hashes into requirements/lock.txt and requirements/no-deps.txt (issue 43, L10).

`uv pip compile --generate-hashes --no-deps` of the pins as they are (no resolution: the lock is the closure
already), against PyPI itself, never a mirror or a wheel folder this machine is configured with: a hash list must
hold every file PyPI has for that version (each Python and platform a user may install on), or installing on one
of them fails. Each pin stays one line, `name==version --hash=sha256:... ...`, so the shell's and Docker's line
tools keep working (venv-lib.sh `pin`, the Dockerfile's constraints). Comments are kept.

Not hashed: torch. The CPU venv takes its torch from PyTorch's CPU index (scripts/setup-venv.sh), whose wheels are
not PyPI's, and that index is out of this project's reach here; its pin stays bare (said in the lock's header).

Run it after changing a pin: `python3 scripts/lock_hashes.py` (needs uv: the project's `.venv/bin/uv`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = (ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "no-deps.txt")
UNHASHED = {"torch"}  # from PyTorch's CPU index, not PyPI (see the docstring)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")
PYPI = "https://pypi.org/simple"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def hashes(pins: list[str], uv: str) -> dict[str, list[str]]:
    """{canonical name: ["sha256:...", ...]} for `name==version` pins, from PyPI."""
    with tempfile.NamedTemporaryFile("w", suffix=".in") as spec:
        spec.write("\n".join(pins) + "\n")
        spec.flush()
        out = subprocess.run([uv, "pip", "compile", "--quiet", "--no-config", "--no-deps", "--generate-hashes",
                              "--no-header", "--no-annotate", "--index-url", PYPI, "--python-version", "3.11",
                              spec.name], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[str]] = {}
    name = ""
    for line in out.splitlines():
        match = PIN.match(line.strip())
        if match:
            name = canonical(match.group(1))
            found[name] = []
        for digest in re.findall(r"--hash=(sha256:[0-9a-f]{64})", line):
            found[name].append(digest)
    return found


def rewrite(path: Path, found: dict[str, list[str]]) -> None:
    lines = []
    for raw in path.read_text().splitlines():
        match = PIN.match(raw)
        if not match or canonical(match.group(1)) in UNHASHED:
            lines.append(raw)
            continue
        digests = found[canonical(match.group(1))]
        lines.append(" ".join([f"{match.group(1)}=={match.group(2)}", *(f"--hash={d}" for d in digests)]))
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    uv = str(ROOT / ".venv" / "bin" / "uv")
    pins = [f"{m.group(1)}=={m.group(2)}" for path in FILES for raw in path.read_text().splitlines()
            if (m := PIN.match(raw)) and canonical(m.group(1)) not in UNHASHED]
    found = hashes(pins, uv)
    missing = [p for p in pins if not found.get(canonical(p.split("==")[0]))]
    if missing:
        print(f"error: no hashes for {', '.join(missing)}", file=sys.stderr)
        return 1
    for path in FILES:
        rewrite(path, found)
    print(f"{len(pins)} pins hashed ({sum(len(v) for v in found.values())} files) in "
          f"{', '.join(str(p.relative_to(ROOT)) for p in FILES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
