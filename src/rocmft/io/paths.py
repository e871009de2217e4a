"""Where the project's folders are: recipes, templates, ds_configs, data, runs, and the user's workspace.

The project root is found from ROCMFT_ROOT, else by walking up from the current directory to the folder
that holds `recipes/` and `ds_configs/`. Inside a container the root is the mounted checkout, so the
same relative paths work on the host, in Docker and on every Slurm node.

What the user makes (`make data`, `make copy`, `make import`) goes to their workspace, never into the tracked
tree: `my/` in the checkout (ignored by git, so `git pull` never conflicts with it and an image built
from the checkout is not "-dirty"), or ROCMFT_WORKSPACE. Its `data/` (ROCMFT_DATA_DIR moves it alone) holds the
user's datasets and their dataset_info.json, its `recipes/` their recipes, found by name like shipped ones.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)
def _root_from(start: str, env: str | None) -> Path:
    if env:
        return Path(env).resolve()
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / "recipes").is_dir() and (folder / "ds_configs").is_dir():
            return folder
    # Installed without a checkout (e.g. in the image): the package's own source tree, if editable.
    pkg = Path(__file__).resolve().parents[3]
    if (pkg / "recipes").is_dir():
        return pkg
    raise FileNotFoundError(
        "cannot find the rocmft project (a folder with recipes/ and ds_configs/): "
        "run from inside the checkout or set ROCMFT_ROOT"
    )


def root() -> Path:
    return _root_from(os.getcwd(), os.environ.get("ROCMFT_ROOT"))


def recipes_dir() -> Path:
    return root() / "recipes"


def templates_dir() -> Path:
    return root() / "recipes" / "templates"


def ds_configs_dir() -> Path:
    return root() / "ds_configs"


def arches_file() -> Path:
    return root() / "docker" / "arches.yaml"


def data_dir() -> Path:
    return root() / "data"


WORKSPACE = "my"


def workspace() -> Path:
    return Path(os.environ.get("ROCMFT_WORKSPACE") or root() / WORKSPACE)


def user_data_dir() -> Path:
    """Where `make data` writes and registers: the user's datasets beside a copy of the shipped entries."""
    return Path(os.environ.get("ROCMFT_DATA_DIR") or workspace() / "data")


def user_recipes_dir() -> Path:
    """Where `make copy` and `make import` write the user's recipes."""
    return workspace() / "recipes"


def shown(path: Path) -> str:
    """A path as the user reads it: from the project root when inside it, else absolute (a link at the path is
    not followed: it is the name that is meant)."""
    full = Path(path).absolute()
    full = full.parent.resolve() / full.name
    try:
        return str(full.relative_to(root().resolve()))
    except ValueError:
        return str(full)


def runs_dir() -> Path:
    return Path(os.environ.get("ROCMFT_RUNS", root() / "runs"))


def cache_dir() -> Path:
    return root() / ".cache"


# The tiny test model's folder (scripts/make_tiny_model.py --out default), here so that the planner can tell a
# recipe naming it from a hub model without importing its builder (rocmft.tiny_model).
TINY_MODEL = "models/tiny-llama"


def is_tiny_model(model: str, root: Path) -> bool:
    if not model:
        return False
    path = Path(model).expanduser()
    path = path if path.is_absolute() else root / path
    return path.resolve() == (root / TINY_MODEL).resolve()
