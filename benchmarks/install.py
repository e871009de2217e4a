#!/usr/bin/env python3
"""How long a new user waits, measured from nothing (a benchmark to rerun, not a test).

1. light host: a fresh clone, `make host` (the venv with the rocmft CLI and its light dependencies; no torch).
   Target <= 20 s.
2. plan: a fresh clone, `make plan RECIPE=llama3-8b-z3` to its output (includes 1). Target <= 30 s.
3. cold start: a fresh clone, `make demo` with an empty venv (the CPU training stack, the tiny model, a
   real training, the base-vs-trained answers). Target <= 60 s on 2 cores with warm package caches (issue 23).
   Then where those seconds went: each phase from the line that starts it to the next one's (PHASES).

Each figure is printed with its ratio to the target. The package caches (uv's, pip's) are the machine's,
as a returning user's would be; --empty-caches points uv and pip at empty folders instead (everything is
downloaded: this measures the network as much as the project). The CPU torch comes from wherever this
machine's setup finds it (TORCH_INDEX_URL, pip's wheel folder, or PyTorch's CPU index).

    python3 benchmarks/install.py [--skip-demo | --demo-only] [--empty-caches]
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
# The cold start's phases, each named for what runs until the next one's first line (make demo's own output).
PHASES = (("clone, make starts", None),
          ("light host venv", "==> light host"),
          ("CPU stack: uv + import check", "==> CPU training stack"),
          ("tiny model", "==> .venv ready"),
          ("render + validate + plan", "tiny model:"),
          ("run dir, launch", "plan tiny-cpu-demo:"),
          ("worker: imports, data, model, step 1", "[rocmft] command:"),
          ("training: steps 2.., evals, save", "[rocmft] step 1/"),
          ("chat: base and trained answer", "[rocmft] done:"),
          ("end", "[rocmft] asked:"))


def clone(into: Path) -> Path:
    dest = into / "rocmft"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest


def timed(what: str, cmd: list[str], cwd: Path, env: dict[str, str], with_clone: bool = True) -> float:
    start = time.perf_counter()
    if with_clone:
        cwd = clone(cwd)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.perf_counter() - start, line) for line in proc.stdout]  # each line with when it came
    elapsed = time.perf_counter() - start
    if proc.wait() != 0:
        sys.exit(f"{what} failed: {' '.join(cmd)}\n{''.join(line for _, line in lines)[-3000:]}")
    target = TARGETS[what]
    print(f"{what:<11} {elapsed:6.1f} s   target {target:5.0f} s   ratio {elapsed / target:.2f}", flush=True)
    if what == "cold start":
        for name, seconds in phases(lines, elapsed):
            print(f"  {name:<38} {seconds:5.1f} s", flush=True)
    return elapsed


def phases(lines: list[tuple[float, str]], elapsed: float) -> list[tuple[str, float]]:
    """(phase, seconds) of PHASES: from the first line starting with a phase's marker to the next phase's."""
    starts = [0.0]
    for _, marker in PHASES[1:]:
        starts.append(next((t for t, line in lines if line.startswith(marker)), starts[-1]))
    starts.append(elapsed)
    return [(name, starts[i + 1] - starts[i]) for i, (name, _) in enumerate(PHASES)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-demo", action="store_true", help="only the light host and plan figures")
    parser.add_argument("--demo-only", action="store_true", help="only the cold start and its phases")
    parser.add_argument("--empty-caches", action="store_true", help="uv and pip start with empty caches")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "ROCMFT"))}
    with tempfile.TemporaryDirectory() as tmp:
        if args.empty_caches:
            env.update(UV_CACHE_DIR=f"{tmp}/uv-cache", PIP_NO_CACHE_DIR="1")
        quick = () if args.demo_only else (("light host", ["make", "host"]), ("plan", ["make", "plan", "RECIPE=llama3-8b-z3"]))
        for i, (what, target) in enumerate(quick):
            folder = Path(tmp) / f"{i}"
            folder.mkdir()
            timed(what, target, folder, env)
        if not args.skip_demo:
            folder = Path(tmp) / "demo"
            folder.mkdir()
            timed("cold start", ["make", "demo"], folder, env)


if __name__ == "__main__":
    main()
