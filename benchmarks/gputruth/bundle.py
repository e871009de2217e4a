"""The pinned wheels a bare GPU machine lacks for the training path: downloaded here, installed there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from . import ROOT, SRC

# The pinned pure-Python wheels (plus tokenizers and pydantic-core, binary) a machine with torch,
# transformers, numpy, pyarrow, pandas and triton preinstalled lacks for LLaMA-Factory 0.9.5's training path;
# found by importing that path in the CPU venv and removing what such a machine ships (device KINDS.md).
# Versions come from requirements/lock.txt; the ones the lock cannot hold from hardware/versions.py.
BUNDLE = ("llamafactory", "transformers", "tokenizers", "datasets", "peft", "trl", "accelerate", "deepspeed",
          "liger-kernel", "hjson", "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "dill",
          "multiprocess", "omegaconf", "fsspec", "pytz", "docstring-parser",
          "huggingface-hub", "safetensors", "py-cpuinfo", "msgpack", "ninja", "regex", "tqdm", "docker")
BUNDLE_LIMIT_MIB = 64  # what the device tool carries; the bundle must stay well under it


def lock_pins() -> dict[str, str]:
    sys.path.insert(0, str(SRC))
    from rocmft.hardware import versions

    pins = versions.read_pins(versions.lock_file())
    pins.setdefault("liger-kernel", versions.LIGER_KERNEL_VERSION)
    return pins


def bundle(out: Path) -> int:
    """Download the pinned wheels (py3.12, manylinux x86_64) and build DeepSpeed's (an sdist) with no ops."""
    pins = lock_pins()
    missing = [n for n in BUNDLE if n not in pins]
    if missing:
        print(f"gpu_truth bundle: no pin in requirements/lock.txt for {', '.join(missing)}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    wheels = [f"{n}=={pins[n]}" for n in BUNDLE if n != "deepspeed"]
    platform = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platform, "-d", str(out), *wheels], check=True)
    # DeepSpeed ships an sdist only; built without ops (DS_BUILD_OPS=0) it is a pure-Python wheel whose ops
    # JIT-compile where they are used (none are: no optimizer block, no offload in this matrix).
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                    f"deepspeed=={pins['deepspeed']}"], check=True, env=env)
    size = sum(p.stat().st_size for p in out.glob("*.whl")) / 2 ** 20
    (out / "BUNDLE.txt").write_text("".join(f"{p.name}\n" for p in sorted(out.glob("*.whl"))))
    print(f"gpu_truth bundle: {len(list(out.glob('*.whl')))} wheels, {size:.1f} MiB in {out}")
    if size > BUNDLE_LIMIT_MIB:
        print(f"gpu_truth bundle: over {BUNDLE_LIMIT_MIB} MiB", file=sys.stderr)
        return 1
    return 0


def install_bundle(wheels: Path, site: Path) -> None:
    """--no-deps into a target folder: nothing compiled, the machine's torch/numpy/triton untouched."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise SystemExit(f"gpu_truth: no wheels in {wheels} (prepare them with: python3 benchmarks/gpu_truth.py bundle)")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, found)], check=True)
    print(f"gpu_truth: {len(found)} wheels installed into {site} in {time.perf_counter() - t0:.0f} s", flush=True)


PREFLIGHT = """
import importlib, importlib.metadata as m
for mod in ("torch", "transformers", "llamafactory.train.tuner", "peft", "trl", "datasets", "deepspeed",
            "liger_kernel.transformers", "rocmft.worker"):
    try:
        importlib.import_module(mod)
        print("ok  ", mod)
    except Exception as exc:
        print("FAIL", mod, type(exc).__name__, str(exc)[:300])
print("versions:", {d: m.version(d) for d in ("torch", "transformers", "llamafactory", "peft", "trl", "datasets",
                                              "accelerate", "deepspeed", "liger-kernel", "triton") if _has(d)})
"""


def preflight(env: dict, log) -> None:
    """Import the training path once, before any configuration: a missing package shows here, named."""
    code = "def _has(d):\n    import importlib.metadata as m\n    try:\n        m.version(d); return True\n" \
           "    except m.PackageNotFoundError:\n        return False\n" + PREFLIGHT
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    log("preflight (imports of the training path):\n" + "\n".join(
        line for line in proc.stdout.splitlines() if line.startswith(("ok", "FAIL", "versions"))))
