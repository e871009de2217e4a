"""Run directories: one new directory per run (never reused), what ran, how it ended, where to resume.

Layout of runs/<name>/:
  recipe.resolved.yaml  train.yaml  ds_config.json   what was asked, fully resolved, and what LLaMA-Factory read
  plan.json             argv, env (secrets by name only), cwd, mounts, devices, runtime, image
  versions.json         rocmft + git commit, Python, and the training stack's versions
  status.json           running | requeued | succeeded | failed | interrupted | diverged, exit code, times,
                        and each attempt (a Slurm requeue is the next one): start, end, how it ended, the
                        steps it trained, torchrun's restarts in it, nodes
  train.log             everything the job printed
  output/               the job's folder, the ONLY part of the run dir a container or an Apptainer job can
                        write: LLaMA-Factory's output_dir (adapter, checkpoint-N/, trainer_log.jsonl,
                        training_loss.png) and rocmft's job files: progress.jsonl (one event per logged step,
                        run/events.py), diverged.json (the watchdog), metrics.json (the metrics callback)

Everything above output/ is the host's: written by the host only (rocmft.io.hostio: unique temp names, never
through a link), and never mounted writable into a job. What the host reads from output/ is the job's word:
read as untrusted data (size caps, types checked). Run dirs from before this split kept the job files at the top:
`job_file` still finds them there.
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

from .. import __version__
from ..io import hostio, paths
from ..io.problems import Problem, ProblemReport
from .jobfiles import JOB_DIR, job_dir, job_file  # noqa: F401  (the run dir's job folder: runs.job_dir)

STATES = ("rendered", "running", "requeued", "succeeded", "failed", "interrupted", "diverged")
# The command that made a run dir (status.json `made_by`): only `train` runs are `last` (run/pick.py).
MADE_BY = ("train", "dry-run", "render", "canary", "bench")
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
    """Create the chosen run dir and its job folder; exclusive, so two launches can never share one. Private
    (0700): train.log prints training examples, and the dir holds the checkpoints and config a later command
    loads as you; the job runs as you (container included), so nobody else needs in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise ProblemReport([Problem("", "RUN_NAME", f"run dir {relative(path)} appeared meanwhile: runs are never reused",
                                     "launch again")]) from None
    job_dir(path).mkdir()
    return path


def write_json(path: Path, data: Any) -> None:
    """A host file of a run dir, written whole and never through a link (rocmft.io.hostio)."""
    hostio.write_json(path, data)


def write_inputs(run_dir: Path, resolved_recipe: dict, train_yaml: str, ds_config: str | None) -> None:
    hostio.write_text(run_dir / "recipe.resolved.yaml", yaml.safe_dump(resolved_recipe, sort_keys=False, allow_unicode=True))
    hostio.write_text(run_dir / "train.yaml", train_yaml)
    if ds_config is not None:
        hostio.write_text(run_dir / "ds_config.json", ds_config)


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
    """status.json, or {} when it is missing or not a JSON object (a run dir older rocmft let a job write to);
    its attempts are kept only as a list of objects, since `mark` extends them."""
    status = hostio.read_json(run_dir / "status.json") or {}
    attempts = status.get("attempts")
    if attempts is not None:
        status["attempts"] = [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []
    return status


def mark(run_dir: Path, state: str, *, attempt: int | None = None, **fields: Any) -> dict[str, Any]:
    """Record the run's state. `running` opens an attempt (`attempt`: its number, default the next one),
    every later state closes it with what the job's events say it did."""
    assert state in STATES, state
    status = read_status(run_dir)
    status.update(fields)
    status["state"] = state
    now = time.time()
    attempts = status.setdefault("attempts", [])
    if state == "running":
        status.setdefault("started", now)
        for stale in ("ended", "exit_code", "reason", "signal"):  # the previous attempt's, kept in `attempts`
            if stale not in fields:
                status.pop(stale, None)
        if attempts and "ended" not in attempts[-1]:
            _close(run_dir, attempts[-1], now, "ended without a record (killed, or requeued by Slurm)")
        keep = ("host", "job_id", "nodelist")
        attempts.append({"attempt": attempt or len(attempts) + 1, "started": now,
                         **{k: fields[k] for k in keep if fields.get(k)}})
    elif state != "rendered":
        status["ended"] = now
        if attempts:
            reason = fields.get("reason") or fields.get("signal")
            _close(run_dir, attempts[-1], now, state if not reason else f"{state}: {reason}", fields.get("exit_code"))
    write_json(run_dir / "status.json", status)
    return status


def _close(run_dir: Path, attempt: dict[str, Any], now: float, how: str, code: int | None = None) -> None:
    """Fill an attempt's end from the job's events: the steps it trained, restarts, the checkpoint it stopped at."""
    from . import events

    attempt.setdefault("ended", now)
    attempt["how"] = how
    if code is not None:
        attempt["exit_code"] = code
    parts = [p for p in events.segments(events.read(run_dir)) if int(p["begin"].get("attempt") or 1) == attempt["attempt"]]
    if not parts:
        return
    reached = [int(e["step"]) for p in parts for e in (*p["steps"], p["stop"], p["end"]) if e and e.get("step") is not None]
    attempt.update(start_step=int(parts[0]["begin"].get("start_step") or 0), step=max(reached, default=None),
                   restarts=len(parts) - 1)
    if parts[-1]["stop"]:
        attempt.update(stopped_by=parts[-1]["stop"].get("signal"), checkpoint=parts[-1]["stop"].get("checkpoint"))


# ---------------------------------------------------------------- listing, losses, checkpoints

def log_entries(run_dir: Path) -> list[dict[str, Any]]:
    """LLaMA-Factory's trainer_log.jsonl: one JSON object per logged step."""
    entries = []
    text = hostio.read_text(job_dir(run_dir) / "trainer_log.jsonl", hostio.LOG_LIMIT) or ""
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def losses(run_dir: Path) -> list[tuple[int, float]]:
    found = []
    for e in log_entries(run_dir):
        try:
            found.append((int(e["current_steps"]), float(e["loss"])))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def checkpoints(run_dir: Path) -> list[Path]:
    from .checkpoints import listed

    return [p for _, p in listed(job_dir(run_dir))]


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
    stage: str = "sft"
    made_by: str = "train"  # MADE_BY: which command made the run dir


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
        if state == "running" and not alive(status):
            state = "interrupted"  # the launcher died without saying how the run ended
        # the job's events first (what a running run has too); trainer_log.jsonl for runs from before them
        from . import events

        t = events.totals(events.read(run_dir))
        loss = [t.last_loss] if t.last_loss else losses(run_dir)
        started, ended = _number(status.get("started")), _number(status.get("ended"))
        code = status.get("exit_code")
        infos.append(RunInfo(run_dir, str(status.get("recipe", run_dir.name)), str(state), loss[-1][1] if loss else None,
                             (ended - started) if started and ended else None, started,
                             code if isinstance(code, int) else None,
                             t.tokens_per_s_per_gpu, t.last_step, t.max_steps,
                             status.get("stage") or t.stage or _stage(run_dir), made_by(run_dir, status)))
    return sorted(infos, key=lambda r: (r.started or r.path.stat().st_mtime, r.path.name))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def made_by(run_dir: Path, status: dict[str, Any]) -> str:
    """Which command made the run dir: status.json says so; a run dir from before it did is judged by what it
    holds (a canary's name, a bench record, a dry run's versions.json, a render's state)."""
    if status.get("made_by") in MADE_BY:
        return str(status["made_by"])
    if "-canary-" in run_dir.name:
        return "canary"
    if (run_dir / "bench.json").is_file():  # bench.record.BENCH_FILE
        return "bench"
    if (hostio.read_json(run_dir / "versions.json") or {}).get("dry_run"):
        return "dry-run"
    return "render" if status.get("state", "rendered") == "rendered" else "train"


def _stage(run_dir: Path) -> str:
    """The stage a run from before status.json recorded it trained: its train.yaml's."""
    try:
        args = yaml.safe_load((run_dir / "train.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "?"
    return str(args.get("stage") or "sft") if isinstance(args, dict) else "?"


def alive(status: dict[str, Any]) -> bool:
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


def utc_iso(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"
