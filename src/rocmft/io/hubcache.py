"""The Hugging Face cache on disk: where it is and whether it holds a model, read as huggingface_hub lays it out.

No huggingface_hub import: the light host does not have it, and the layout is stable and documented
(https://huggingface.co/docs/huggingface_hub/guides/manage-cache): `<hub cache>/models--<org>--<name>/snapshots/
<commit>/config.json`, `refs/main` naming the commit. The hub cache is the one huggingface_hub's constants pick (constants.py): $HF_HUB_CACHE,
else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. RUNTIME=docker mounts
that same HF_HOME at the same path (launch/docker/spec.py) and Slurm binds it, so what is found here is what
the job finds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

_TRUE = ("1", "on", "yes", "true")


def hf_home(env: Mapping[str, str]) -> Path:
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "huggingface"


def hub_cache(env: Mapping[str, str]) -> Path:
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    return hf_home(env) / "hub"


def offline(env: Mapping[str, str]) -> bool:
    """huggingface_hub's own rule (constants.HF_HUB_OFFLINE): HF_HUB_OFFLINE, or the older TRANSFORMERS_OFFLINE."""
    value = env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def repo_folder(repo_id: str, repo_type: str = "model") -> str:
    return f"{repo_type}s--" + repo_id.replace("/", "--")


def cached_model(repo_id: str, env: Mapping[str, str], revision: str = "main") -> Path | None:
    """The cached snapshot of `repo_id` at `revision` when it has a config.json, else None. As offline
    huggingface_hub resolves it (file_download.try_to_load_from_cache): `refs/<revision>` names the commit whose
    snapshot is read; a snapshot no ref points at is not found by the job."""
    repo = hub_cache(env) / repo_folder(repo_id)
    ref = repo / "refs" / revision
    try:
        commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else revision
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if commit and (snapshot / "config.json").is_file() else None


def looks_like_repo_id(name: str) -> bool:
    """`org/name` or a legacy single name (`gpt2`); never a path that starts like one."""
    if not name or name.startswith(("/", ".", "~")) or name.count("/") > 1:
        return False
    return all(part and not part.startswith((".", "-")) for part in name.split("/"))
