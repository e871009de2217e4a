"""`make fetch`: what to download into the HF cache, and the command that downloads it.

A login node with internet fetches; the Slurm job on compute nodes without it then runs with HF_HUB_OFFLINE=1
from the same HF_HOME. The download itself (`fetch.worker`, huggingface_hub.snapshot_download: a progress bar,
resumed where it stopped; a benchmark's datasets through lm-evaluation-harness's own task loading) runs where
huggingface_hub and lm_eval are: the training venv, or the arch's image. Everything
here is pure: the targets from a recipe's rendered args, and the plan (argv, environment, secrets by name).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..evaluate.harness_plan import SHIPPED_TASKS, TASK_FILE_SUFFIXES, task_code_problems
from ..io import hubcache
from ..recipe.recipes import SECRET_ENV

WORKER = ("-m", "rocmft.fetch.worker")
# What the download passes on to the job and nothing else (HF_HUB_OFFLINE too: a cache hit is then said offline).
PASSED_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
              "HF_HUB_ENABLE_HF_TRANSFER", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")


@dataclass(frozen=True)
class Target:
    repo_id: str  # for a "task": the harness's task/group name, or the absolute path of a task YAML
    repo_type: str  # "model" | "dataset" | "task"


@dataclass(frozen=True)
class FetchPlan:
    where: str  # "venv" | "image"
    argv: tuple[str, ...]
    env: Mapping[str, str]  # set for the command, never a secret
    secret_env: tuple[str, ...]  # names only: the value stays in the caller's environment (docker --env=NAME)
    targets: tuple[Target, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "env": dict(self.env)}, indent=2) + "\n"


def targets(args: Mapping[str, Any], root: Path) -> tuple[list[Target], list[str]]:
    """(Hub repos the run reads, notes on what needs no fetching). Datasets: LLaMA-Factory's dataset_info entries
    with `hf_hub_url`, every name under `dataset_dir: ONLINE`, the repo of `dataset_dir: REMOTE:<repo>`
    (llamafactory/data/parser.py)."""
    from ..validate.inputs import is_local_path

    found: list[Target] = []
    notes: list[str] = []
    model = str(args.get("model_name_or_path") or "")
    if model and (is_local_path(model, root) or not hubcache.looks_like_repo_id(model)):
        notes.append(f"model `{model}` is a local path: nothing to fetch")
    elif model:
        found.append(Target(model, "model"))
    names = [n.strip() for key in ("dataset", "eval_dataset") for n in _names(args.get(key)) if n.strip()]
    dataset_dir = str(args.get("dataset_dir") or "data")
    if dataset_dir == "ONLINE":
        found += [Target(n, "dataset") for n in names]
        return _unique(found), notes
    if dataset_dir.startswith("REMOTE:"):
        found.append(Target(dataset_dir[len("REMOTE:"):], "dataset"))
        return _unique(found), notes
    folder = Path(dataset_dir) if Path(dataset_dir).is_absolute() else root / dataset_dir
    try:
        info = json.loads((folder / "dataset_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    for name in names:
        entry = info.get(name) if isinstance(info, dict) else None
        if isinstance(entry, dict) and entry.get("hf_hub_url"):
            found.append(Target(str(entry["hf_hub_url"]), "dataset"))
    return _unique(found), notes


def _names(value) -> list[str]:
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, list) else str(value).split(",")


def _unique(found: list[Target]) -> list[Target]:
    return list(dict.fromkeys(found))


def task_targets(tasks: str, cwd: Path) -> list[Target]:
    """`TASKS=mmlu,arc_easy,my/task.yaml`: the harness's names as given (the worker checks them against the
    harness's own list: this host may not have it), a task YAML as an absolute path (the worker runs in the
    project root, or in the image with the project mounted at the same path)."""
    found = []
    for word in (w.strip() for w in tasks.split(",")):
        if word.endswith(TASK_FILE_SUFFIXES) and (cwd / word).is_file():
            word = str((cwd / word).resolve())
        if word:
            found.append(Target(word, "task"))
    return _unique(found)


def task_file_problems(found: list[Target], root: Path, env: Mapping[str, str]) -> list:
    """A task YAML is built to fetch its data, which imports its `!function` Python: one from outside eval_tasks/
    only with TRUST_TASK_CODE=1, in the venv and in the image alike (the download holds the Hub token there too)."""
    files = [t.repo_id for t in found if t.repo_type == "task" and t.repo_id.endswith(TASK_FILE_SUFFIXES)]
    return task_code_problems(files, root, env, "while its datasets are fetched")


def worker_args(found: list[Target], root: Path | None = None) -> list[str]:
    words: list[str] = []
    for target in found:
        words += [f"--{target.repo_type}", target.repo_id]
    if root is not None and any(t.repo_type == "task" for t in found):  # the project's own, beside the harness's
        words += ["--include-path", str(root / SHIPPED_TASKS)]
    return words


def _environment(env: Mapping[str, str]) -> dict[str, str]:
    out = {k: env[k] for k in PASSED_ENV if env.get(k)}
    out["HF_HOME"] = str(hubcache.hf_home(env).resolve())  # the job's cache (host.default_hf_home's rule)
    return out


def secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(name for name in SECRET_ENV if name.startswith(("HF", "HUGGING"))
                 if env.get(name))


def venv_plan(found: list[Target], env: Mapping[str, str], python: str, root: Path | None = None) -> FetchPlan:
    """The training venv's python; it inherits the caller's environment, so the token is never named on argv.
    `root`: the project, whose eval_tasks/ the harness's tasks are looked up beside (only with task targets)."""
    return FetchPlan("venv", (python, *WORKER, *worker_args(found, root)), _environment(env), secrets(env),
                     tuple(found))


def image_plan(found: list[Target], env: Mapping[str, str], image: str, root: Path, uid: int, gid: int, *,
               tty: bool = False) -> FetchPlan:
    """`docker run` of the arch's image: the HF cache read-write at its own path (where the job mounts it,
    launch/docker/spec.py), the checkout read-only for this rocmft's worker, the network on (it downloads),
    the token passed by name (`--env=HF_TOKEN`: the docker CLI reads the value from its own environment)."""
    passed = _environment(env)
    mounts = [passed["HF_HOME"]]
    if os.path.isabs(passed.get("HF_HUB_CACHE", "")) and not passed["HF_HUB_CACHE"].startswith(passed["HF_HOME"] + "/"):
        mounts.append(passed["HF_HUB_CACHE"])
    argv = ["docker", "run", "--rm", *(["-t"] if tty else []), f"--user={uid}:{gid}", f"--workdir={root}",
            f"--volume={root}:{root}:ro", *(f"--volume={m}:{m}" for m in mounts),
            *(f"--env={k}={v}" for k, v in sorted({**passed, "PYTHONPATH": f"{root}/src", "HOME": "/tmp"}.items())),
            *(f"--env={name}" for name in secrets(env)),
            "--label=ai.rocmft.role=fetch", image, "python", *WORKER, *worker_args(found, root)]
    return FetchPlan("image", tuple(argv), passed, secrets(env), tuple(found))
