"""Run directories: one new directory per run (never reused), what ran, how it ended, where to resume.

Layout of runs/<name>/:
  recipe.resolved.yaml  train.yaml  ds_config.json   what was asked, fully resolved, and what LLaMA-Factory read
  plan.json             argv, env (secrets by name only), cwd, mounts, devices, runtime, image
  versions.json         rocmft + git commit, Python, and the training stack's versions
  status.json           running | succeeded | failed | interrupted | diverged, exit code, times
  progress.jsonl        the job's progress events, one per logged step (launch/events.py): what the terminal,
                        the summary and this listing read
  train.log             everything the job printed
  output/               LLaMA-Factory's output_dir: adapter, checkpoint-N/, trainer_log.jsonl, training_loss.png
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from . import __version__, paths
from .problems import Problem, ProblemReport

STATES = ("rendered", "running", "succeeded", "failed", "interrupted", "diverged")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def relative(path: Path) -> str:
    """A run path as the rendered files name it: relative to the project root when inside it."""
    try:
        return str(path.resolve().relative_to(paths.root()))
    except ValueError:
        return str(path.resolve())


def choose(recipe_name: str, run_name: str | None = None, now: datetime | None = None) -> Path:
    """The path a new run will get (not created yet: nothing is written before the run is valid)."""
    base = paths.runs_dir()
    if run_name:
        if not _NAME.match(run_name):
            raise ProblemReport([Problem("", "RUN_NAME", f"`{run_name}` is not a valid run name", "letters, digits, . _ -")])
        path = base / run_name
        if path.exists():
            raise ProblemReport([Problem("", "RUN_NAME", f"run dir {relative(path)} exists: runs are never reused or overwritten",
                                         "pick another RUN_NAME, or RESUME=<run dir> to continue it in a new run")])
        return path
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        path = base / (f"{recipe_name}-{stamp}" if n == 1 else f"{recipe_name}-{stamp}-{n}")
        if not path.exists():
            return path
    raise RuntimeError("could not find a free run directory name")


def create(path: Path) -> Path:
    """Create the chosen run dir; exclusive, so two launches can never share one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
    except FileExistsError:
        raise ProblemReport([Problem("", "RUN_NAME", f"run dir {relative(path)} appeared meanwhile: runs are never reused",
                                     "launch again")]) from None
    return path


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def write_inputs(run_dir: Path, resolved_recipe: dict, train_yaml: str, ds_config: str | None) -> None:
    (run_dir / "recipe.resolved.yaml").write_text(yaml.safe_dump(resolved_recipe, sort_keys=False, allow_unicode=True))
    (run_dir / "train.yaml").write_text(train_yaml)
    if ds_config is not None:
        (run_dir / "ds_config.json").write_text(ds_config)


def git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def stack_versions() -> dict[str, str]:
    found = {"rocmft": __version__, "python": ".".join(map(str, os.sys.version_info[:3]))}
    for dist in ("torch", "llamafactory", "transformers", "deepspeed", "peft", "accelerate", "datasets"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


def write_versions(run_dir: Path, image: str | None = None, extra: dict | None = None) -> None:
    data = {"git_commit": git_commit(paths.root()), "host_stack": stack_versions()}
    if image:
        data["image"] = image
    data.update(extra or {})
    write_json(run_dir / "versions.json", data)


# ---------------------------------------------------------------- status

def read_status(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def mark(run_dir: Path, state: str, **fields: Any) -> dict[str, Any]:
    assert state in STATES, state
    status = read_status(run_dir)
    status.update(fields)
    status["state"] = state
    now = time.time()
    if state == "running":
        status.setdefault("started", now)
    elif state != "rendered":
        status["ended"] = now
    write_json(run_dir / "status.json", status)
    return status


# ---------------------------------------------------------------- listing, losses, checkpoints

def log_entries(run_dir: Path) -> list[dict[str, Any]]:
    """LLaMA-Factory's trainer_log.jsonl: one JSON object per logged step."""
    entries = []
    try:
        with open(run_dir / "output" / "trainer_log.jsonl", encoding="utf-8") as fh:
            for line in fh:
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return entries


def losses(run_dir: Path) -> list[tuple[int, float]]:
    return [(int(e["current_steps"]), float(e["loss"])) for e in log_entries(run_dir)
            if e.get("loss") is not None and "current_steps" in e]


def checkpoints(run_dir: Path) -> list[Path]:
    found = []
    for path in (run_dir / "output").glob("checkpoint-*"):
        suffix = path.name.split("-", 1)[1]
        if path.is_dir() and suffix.isdigit():
            found.append((int(suffix), path))
    return [p for _, p in sorted(found)]


@dataclass(frozen=True)
class RunInfo:
    path: Path
    recipe: str
    state: str
    final_loss: float | None
    duration_s: float | None
    started: float | None
    exit_code: int | None
    tokens_per_s_per_gpu: float | None = None
    last_step: int | None = None
    max_steps: int | None = None


def all_runs() -> list[RunInfo]:
    base = paths.runs_dir()
    if not base.is_dir():
        return []
    infos = []
    for run_dir in base.iterdir():
        if not (run_dir / "train.yaml").is_file():
            continue
        status = read_status(run_dir)
        state = status.get("state", "rendered")
        if state == "running" and not _alive(status):
            state = "interrupted"  # the launcher died without saying how the run ended
        # the job's events first (what a running run has too); trainer_log.jsonl for runs from before them
        from .launch import events

        t = events.totals(events.read(run_dir))
        loss = [t.last_loss] if t.last_loss else losses(run_dir)
        started, ended = status.get("started"), status.get("ended")
        infos.append(RunInfo(run_dir, status.get("recipe", run_dir.name), state, loss[-1][1] if loss else None,
                             (ended - started) if started and ended else None, started, status.get("exit_code"),
                             t.tokens_per_s_per_gpu, t.last_step, t.max_steps))
    return sorted(infos, key=lambda r: (r.started or r.path.stat().st_mtime, r.path.name))


def _alive(status: dict[str, Any]) -> bool:
    pid = status.get("launcher_pid")
    if not pid or status.get("host") != os.uname().nodename:
        return True  # not ours to judge (another host, or a container runtime that reports itself)
    try:
        os.kill(int(pid), 0)
        return True
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True


def find(spec: str, recipe_name: str | None = None) -> Path:
    """RESUME/RUN: a run dir path, a run name under runs/, or `last` (newest run, of this recipe if given)."""
    if spec == "last":
        candidates = [r for r in all_runs() if recipe_name is None or r.recipe == recipe_name]
        if not candidates:
            raise ProblemReport([Problem("", "RESUME", f"no earlier run{' of ' + recipe_name if recipe_name else ''} to resume")])
        return candidates[-1].path
    for path in (Path(spec), paths.runs_dir() / spec):
        if (path / "train.yaml").is_file():
            return path.resolve()
    raise ProblemReport([Problem("", "RUN", f"`{spec}` is not a run directory (no train.yaml)", "see `make runs`")])


def resume_checkpoint(spec: str, recipe_name: str) -> Path:
    run_dir = find(spec, recipe_name)
    found = checkpoints(run_dir)
    if not found:
        raise ProblemReport([Problem("", "RESUME", f"{relative(run_dir)} has no checkpoint to resume from",
                                     "checkpoints are written every `save_steps` steps into output/checkpoint-N")])
    return found[-1]


def utc_iso(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"
