"""`make train ... DRY_RUN=1` on a machine with no GPU, no Docker daemon (DOCKER_HOST points at nothing) and no
Slurm (no sbatch on PATH): the whole launch plan is printed, the exit code is 0, and nothing is written outside
the run dir (a marker's mtime against every file of the project and of HOME)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT

SYSTEM_PATH = ("/usr/bin", "/bin")
# In the caller's shell, as on a user's login node: a dry run must show where they go, never what they are.
SECRETS = {"HF_TOKEN": "hf_DryRunSecret0123456789", "WANDB_API_KEY": "wandb_DryRunSecret987654321"}
SLURM_COMMANDS = {"sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo", "salloc", "sacct"}


def path_without_slurm(tmp_path: Path) -> str:
    """A PATH holding the system's programs but none of Slurm's: a login node without Slurm, even on a
    machine where CI installed it (scripts/ci/slurm-up.sh puts sbatch in /usr/bin)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in SYSTEM_PATH:
        for program in Path(folder).iterdir():
            if program.name not in SLURM_COMMANDS and not (bin_dir / program.name).exists():
                (bin_dir / program.name).symlink_to(program)
    assert not (bin_dir / "sbatch").exists() and (bin_dir / "make").exists()
    return str(bin_dir)


def bare_host_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "HF_HOME", "ROCR_VISIBLE_DEVICES")}
    env.update(DOCKER_HOST=f"unix://{tmp_path}/no-daemon.sock", PATH=path_without_slurm(tmp_path), HOME=str(home),
               ROCMFT_RUNS=str(tmp_path / "runs"), HF_HUB_OFFLINE="1", **SECRETS)
    return env


def written_since(marker: float, *roots: Path) -> list[str]:
    skip = {".venv", ".git", "__pycache__", ".pytest_cache"}
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if skip & set(path.relative_to(root).parts):
                continue
            if path.is_file() and path.stat().st_mtime > marker:
                found.append(str(path))
    return found


def only_run_dir(tmp_path: Path, marker: float, proc: subprocess.CompletedProcess) -> Path:
    """The run dir, the only thing written; no secret's value in it nor in anything printed."""
    [run_dir] = list((tmp_path / "runs").iterdir())
    assert written_since(marker, ROOT, tmp_path / "home") == []
    assert '"state": "rendered"' in (run_dir / "status.json").read_text()
    for name, value in SECRETS.items():
        assert value not in proc.stdout + proc.stderr, name
        leaked = [str(f) for f in run_dir.rglob("*") if f.is_file() and value.encode() in f.read_bytes()]
        assert leaked == [], name
    return run_dir


def test_make_train_docker_dry_run_prints_the_container_with_no_daemon_and_no_gpu(tmp_path):
    env = bare_host_env(tmp_path)
    marker = time.time() - 1
    proc = subprocess.run(["make", "--no-print-directory", "train", "RECIPE=llama3-8b-z3", "RUNTIME=docker", "DRY_RUN=1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for part in ("image: rocmft:", "devices: /dev/kfd", "groups:", "environment:", "HIP_FORCE_DEV_KERNARG=1",
                 "HSA_NO_SCRATCH_RECLAIM=1",
                 "ROCMFT_ARCHES=gfx942", "mounts:", f"{ROOT} -> {ROOT} (ro)", "argv: python -m torch.distributed.run",
                 "--nproc_per_node 8", "as a docker run line: docker run --rm --pull=never",
                 "on THIS host a launch would stop here"):
        assert part in out, part
    run_dir = only_run_dir(tmp_path, marker, proc)
    assert_plan_line_is_make_plans(out, env)
    # the secrets by name only: the container gets them from the launching shell
    assert "    HF_TOKEN=<from your shell, never written>" in out.splitlines()
    assert "--env=HF_TOKEN" in out and "--env=WANDB_API_KEY" in out
    # the run dir and its job folder (output/, what a container may write: docs/security.md), nothing started
    assert sorted(p.name for p in run_dir.iterdir()) == ["container.json", "ds_config.json", "output", "plan.json",
                                                         "recipe.resolved.yaml", "status.json", "train.yaml",
                                                         "versions.json"]


def make_plan(env, *variables: str) -> str:
    proc = subprocess.run(["make", "-s", "--no-print-directory", "plan", *variables], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def assert_plan_line_is_make_plans(train_output: str, env) -> None:
    """The plan `make train` prints before launching times the same workload as `make plan RECIPE=...` (no STEPS=):
    the same steps or epochs, the same duration. mk/bench.mk's STEPS default once reached `make plan`, which then
    timed 20 steps whatever the recipe said (a run 68x longer planned as its 20 steps)."""
    full = re.search(r"^  time: (.+) = [\d,]+ optimizer steps, [^:]+: (.+)$", make_plan(env, "RECIPE=llama3-8b-z3"), re.M)
    assert full, "no time line in make plan's output"
    what, duration = full.groups()
    assert f"; {what}: {duration}" in train_output, (what, duration, train_output[-2000:])


def test_make_plan_times_the_recipes_own_steps_unless_steps_is_given(tmp_path):
    env = bare_host_env(tmp_path)
    assert "time: max_steps=12 of 4 packed rows = 12 optimizer steps" in make_plan(env, "RECIPE=tiny-cpu")
    assert "time: 3 steps of 4 packed rows = 3 optimizer steps" in make_plan(env, "RECIPE=tiny-cpu", "STEPS=3")


@pytest.mark.parametrize("runtime, shown", [
    ("local", ["argv: ", "-m torch.distributed.run", "(unset) ROCR_VISIBLE_DEVICES"]),
    ("slurm", ["sbatch script: ", "sbatch.sh", "not submitted"]),
    ("k8s", ["PyTorchJob: ", "pytorchjob.yaml"]),
])
def test_train_dry_run_other_runtimes_with_no_slurm_and_no_daemon(tmp_path, runtime, shown):
    env = bare_host_env(tmp_path)
    assert shutil.which("sbatch", path=env["PATH"]) is None
    marker = time.time() - 1
    proc = subprocess.run([PYTHON, "-m", "rocmft.cli.main", "train", "llama3-8b-z3", "--runtime", runtime, "--no-plan"],
                          cwd=ROOT, env={**env, "DRY_RUN": "1"}, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for part in shown:
        assert part in proc.stdout, (part, proc.stdout)
    run_dir = only_run_dir(tmp_path, marker, proc)
    named = {"local": proc.stdout, "slurm": (run_dir / "sbatch.sh").read_text() if runtime == "slurm" else "",
             "k8s": (run_dir / "pytorchjob.yaml").read_text() if runtime == "k8s" else ""}[runtime]
    assert "HF_TOKEN" in named and "WANDB_API_KEY" in named  # passed on by name
