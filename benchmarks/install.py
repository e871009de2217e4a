#!/usr/bin/env python3
"""How long a new user waits, measured from nothing (a benchmark to rerun, not a test).

1. light host: a fresh clone, `make host` (the venv with the rocmft CLI and its light dependencies; no torch).
   Target <= 20 s.
2. plan: a fresh clone, `make plan RECIPE=llama3-8b-z3` to its output (includes 1). Target <= 30 s.
3. cold start: a fresh clone, `make demo` with an empty venv (the CPU training stack, the tiny model, a
   real training, the base-vs-trained answers). Target <= 60 s on 2 cores with warm package caches (issue 23).

Each figure is printed with its ratio to the target. The package caches (uv's, pip's) are the machine's,
as a returning user's would be; --empty-caches points uv and pip at empty folders instead (everything is
downloaded: this measures the network as much as the project). The CPU torch comes from wherever this
machine's setup finds it (TORCH_INDEX_URL, pip's wheel folder, or PyTorch's CPU index).

    python3 benchmarks/install.py [--skip-demo] [--empty-caches]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"light host": 20.0, "plan": 30.0, "cold start": 60.0}


def clone(into: Path) -> Path:
    dest = into / "rocmft"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest


def timed(what: str, cmd: list[str], cwd: Path, env: dict[str, str], with_clone: bool = True) -> float:
    start = time.perf_counter()
    if with_clone:
        cwd = clone(cwd)
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{what} failed: {' '.join(cmd)}\n{proc.stdout[-3000:]}")
    target = TARGETS[what]
    print(f"{what:<11} {elapsed:6.1f} s   target {target:5.0f} s   ratio {elapsed / target:.2f}", flush=True)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-demo", action="store_true", help="only the light host and plan figures")
    parser.add_argument("--empty-caches", action="store_true", help="uv and pip start with empty caches")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "ROCMFT"))}
    with tempfile.TemporaryDirectory() as tmp:
        if args.empty_caches:
            env.update(UV_CACHE_DIR=f"{tmp}/uv-cache", PIP_NO_CACHE_DIR="1")
        for i, (what, target) in enumerate((("light host", ["make", "host"]),
                                             ("plan", ["make", "plan", "RECIPE=llama3-8b-z3"]))):
            folder = Path(tmp) / f"{i}"
            folder.mkdir()
            timed(what, target, folder, env)
        if not args.skip_demo:
            folder = Path(tmp) / "demo"
            folder.mkdir()
            timed("cold start", ["make", "demo"], folder, env)


if __name__ == "__main__":
    main()
