"""Where an lm-evaluation-harness task's data comes from, read from the task index before anything loads: so a
group YAML is handed over by its name, and a dataset this machine cannot have is named at once with its fix.

- A group YAML's path: lm_eval 0.4.13 names an entry loaded from a path after `task:` or `group:`, whichever
  comes first (tasks/_index.py entry_from_path), and a group's `task:` is its list of tasks, so the path fails
  with `unhashable type: 'list'`. The group is registered by name once its folder is an include path (the plan
  adds it), and the harness takes it by that name.
- A task whose `dataset_path` is a Hub dataset (not a local builder such as `json` with `data_files`) and is in
  neither Hugging Face cache cannot load on a machine without the Hub: refused before `datasets` spends a minute
  retrying the connection, with `make fetch TASKS=` as the fix.
- Without HF_HUB_OFFLINE the job asks the Hub's host once (a TCP connect, seconds at most); unreachable, it goes
  offline itself, so a cached dataset loads from the cache and a missing one fails at once.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

from ..io import hubcache

# `datasets` builders that read local files (data_files): the fix for a miss is the task's paths, not a fetch.
LOCAL_BUILDERS = frozenset(("json", "csv", "parquet", "text", "arrow", "pandas", "imagefolder", "audiofolder"))
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PROBE_TIMEOUT_S = 3.0


def offline(env: MutableMapping[str, str]) -> bool:
    return any(env.get(k, "").strip().lower() in ("1", "true", "yes", "on") for k in OFFLINE_VARS)


def reachable(env: MutableMapping[str, str]) -> bool:
    url = urllib.parse.urlsplit(env.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def go_offline_when_unreachable(env: MutableMapping[str, str]) -> bool:
    """True when the job runs offline (set, or the Hub unreachable: then set here, before huggingface_hub and
    datasets are imported, which read it once)."""
    if offline(env):
        return True
    if reachable(env):
        return False
    for name in OFFLINE_VARS:
        env[name] = "1"
    return True


def group_name(path: str) -> str | None:
    """The group a task YAML defines (`group:` with a `task:` list), else None."""
    from lm_eval.tasks._yaml_loader import load_yaml

    try:
        cfg = load_yaml(path, resolve_func=False)
    except Exception:  # noqa: BLE001 - the harness reports a YAML it cannot read when it loads it
        return None
    group = cfg.get("group")
    return group if isinstance(group, str) and isinstance(cfg.get("task"), list) else None


def _paths(cfg: Any, index: dict, seen: set[str]) -> Iterable[str]:
    """Every dataset_path under a task/group/tag config or name (None for a Python task: unknown)."""
    if isinstance(cfg, str):
        if cfg in seen:
            return
        seen.add(cfg)
        entry = index.get(cfg)
        if entry is None:
            return
        if entry.cfg is None:  # a tag: its tasks
            for task in sorted(entry.tags):
                yield from _paths(task, index, seen)
            return
        cfg = entry.cfg
    if not isinstance(cfg, dict):
        return
    if isinstance(cfg.get("task"), list):
        for child in cfg["task"]:
            yield from _paths(child, index, seen)
    elif cfg.get("dataset_path"):
        yield str(cfg["dataset_path"])
    elif isinstance(cfg.get("task"), str) and cfg["task"] in index and cfg["task"] not in seen:
        yield from _paths(cfg["task"], index, seen)


def hub_datasets(manager, item: str) -> list[str]:
    """The Hub datasets a task, group, tag or task YAML reads (local builders and folders left out)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    root: Any = item
    if item.endswith((".yaml", ".yml")) and os.path.isfile(item):
        try:
            root = load_yaml(item, resolve_func=False)
        except Exception:  # noqa: BLE001
            return []
    found = sorted(set(_paths(root, manager.task_index, set())))
    return [p for p in found if p not in LOCAL_BUILDERS and not Path(p).expanduser().exists()]


def cached(repo_id: str, env: MutableMapping[str, str]) -> bool:
    """In either cache `datasets` reads offline: the Hub's (a snapshot) or its own prepared one."""
    if (hubcache.hub_cache(env) / hubcache.repo_folder(repo_id, "dataset")).is_dir():
        return True
    prepared = Path(env.get("HF_DATASETS_CACHE") or hubcache.hf_home(env) / "datasets")
    return (prepared / repo_id.replace("/", "___")).is_dir()
