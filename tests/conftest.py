"""Shared fixtures: the project root, an offline job environment, the CLI as a subprocess, a validation cache
of the test run's own.

Other test folders add their session fixtures here in sections of their own (a header comment each), so
that parallel changes rebase without touching each other's lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def offline_env(tmp: Path, **extra: str) -> dict[str, str]:
    """What every real run in the tests gets: no hub, caches in the project, run dirs in a tmp folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}
    env.update({
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(ROOT / ".cache" / "hf"), "MPLCONFIGDIR": str(ROOT / ".cache" / "matplotlib"),
        "TORCH_EXTENSIONS_DIR": str(ROOT / ".cache" / "torch_extensions"),
        "ROCMFT_RUNS": str(tmp / "runs"),
    })
    env.update(extra)
    return env


@pytest.fixture(scope="session", autouse=True)
def validation_cache(tmp_path_factory) -> Path:
    """Every test run validates for real: a fresh `ROCMFT_VALIDATION_CACHE` for the session (inherited by the
    CLI subprocesses through `offline_env`), so a warm checkout's .cache/validated/ cannot make "validate
    every shipped recipe" pass without LLaMA-Factory or DeepSpeed looking at anything."""
    from rocmft import validate

    folder = tmp_path_factory.mktemp("validated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(validate.CACHE_ENV, str(folder))
        yield folder


@pytest.fixture
def job_env(tmp_path) -> dict[str, str]:
    return offline_env(tmp_path)


def rocmft(*args: str, env: dict[str, str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "rocmft.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    model = ROOT / "models" / "tiny-llama"
    if not (model / "rocmft-tiny.json").is_file():
        subprocess.run([PYTHON, str(ROOT / "scripts" / "make_tiny_model.py")], cwd=ROOT, check=True)
    return model


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI the services are started first (ROCMFT_REQUIRE_SERVICES=1): a docker/slurm test that skips is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("ROCMFT_REQUIRE_SERVICES") == "1" \
            and any(item.get_closest_marker(m) for m in ("docker", "slurm")):
        # Deliberate, documented skips (e.g. a check for hosts with an AMD GPU driver) stay skips.
        if "this host has an AMD GPU driver" not in str(report.longrepr):
            report.outcome = "failed"
            report.longrepr = f"skipped although CI started the services: {report.longrepr}"
