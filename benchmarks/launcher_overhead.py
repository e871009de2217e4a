#!/usr/bin/env python3
"""What rocmft adds on top of LLaMA-Factory, measured (a benchmark to rerun, not a test).

1. `make train RECIPE=tiny-cpu RUNTIME=local` vs `llamafactory-cli train` on the same rendered YAML,
   alternating, N runs each: median wall times and their ratio (target <= 1.03).
2. Host-side render + plan alone (in-process, no torch import): median seconds (target < 0.5 s), and
   whether torch got imported.
(Install and cold-start times: benchmarks/install.py.)

    .venv/bin/python benchmarks/launcher_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env_for(runs: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(ROOT / ".cache/hf"),
               MPLCONFIGDIR=str(ROOT / ".cache/matplotlib"), ROCMFT_RUNS=str(runs))
    return env


def timed(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed


def launcher_ratio(runs_n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        env = env_for(runs)
        # one render to get a YAML LLaMA-Factory can run as-is, and to warm the validation cache
        subprocess.run(["make", "-s", "render", "RECIPE=tiny-cpu", "RUN_NAME=reference"], cwd=ROOT, env=env,
                       check=True, stdout=subprocess.DEVNULL)
        reference = runs / "reference"
        # the same environment the plan gives the job (threads, accelerator), so only the launcher differs
        from rocmft import pipeline

        plan = pipeline.build_plan(pipeline.prepare("tiny-cpu", validate=False, env=env), env=env)
        lf_env = {**env, **plan.env}
        lf_cli = str(Path(sys.executable).with_name("llamafactory-cli"))
        ours, theirs = [], []
        for i in range(runs_n):
            ours.append(timed(["make", "-s", "train", "RECIPE=tiny-cpu", "RUNTIME=local", f"RUN_NAME=b{i}"], env))
            # a fresh output dir each time, or LLaMA-Factory would resume from the last checkpoint
            yaml_text = (reference / "train.yaml").read_text().replace(f"{reference}/output", f"{runs}/lf{i}")
            (runs / f"lf{i}.yaml").write_text(yaml_text)
            theirs.append(timed([lf_cli, "train", str(runs / f"lf{i}.yaml")], lf_env))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"make train (rocmft, local) median {a:6.2f} s   runs: {', '.join(f'{x:.2f}' for x in ours)}")
        print(f"llamafactory-cli train     median {b:6.2f} s   runs: {', '.join(f'{x:.2f}' for x in theirs)}")
        print(f"ratio rocmft / llamafactory-cli = {a / b:.3f}   (target <= 1.03)")


def render_plan_time(n: int = 20) -> None:
    code = f"""
import os, sys, time, statistics
os.environ['ROCMFT_RUNS'] = {str(ROOT / '.cache' / 'bench-runs')!r}
from rocmft import pipeline
times = []
for _ in range({n}):
    t = time.perf_counter()
    prep = pipeline.prepare('llama3-8b-z3', validate=False, env={{}})
    try:
        from rocmft import plan
        plan.check(prep.recipe)
    except ImportError:
        pass
    pipeline.build_plan(prep, env={{}})
    times.append(time.perf_counter() - t)
print(f"render+plan (in process, warm) median {{statistics.median(times)*1000:.1f}} ms; torch imported: {{'torch' in sys.modules}}")
"""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    cold = time.perf_counter() - start
    print(f"render+plan {n}x in a fresh interpreter, including its start: {cold:.2f} s  (target < 0.5 s for one)")
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("rocmft")), "show", "llama3-8b-z3"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    print(f"`rocmft show llama3-8b-z3` end to end: {time.perf_counter() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    render_plan_time()
    launcher_ratio(args.runs)


if __name__ == "__main__":
    main()
