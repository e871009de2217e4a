"""Text a child process needs that must not be in its argv: a prompt (`make chat PROMPT=`), an eval spec.

Every local user reads every process's command line (`ps`, /proc/<pid>/cmdline) for as long as it runs; the
environment and files are the owner's alone. So the text goes into a file: a fresh folder only the user can
open (0700, unguessable name) under the project's .cache/serve, the file created exclusively and 0600, and
both removed when the job ends. The project is mounted at the same path in a container (read-only, the
job's working directory), so the same path works there; the container runs as the user, so it can read it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..io import paths

FILE_NAME = "text"


def folder() -> Path:
    """.cache/serve: 0700, as the server logs in it (serve/local.py log_path)."""
    where = paths.cache_dir() / "serve"
    where.mkdir(parents=True, exist_ok=True)
    where.chmod(0o700)
    return where


@contextmanager
def holding(text: str) -> Iterator[Path]:
    """A private file holding `text` for the life of the `with` block; its absolute path."""
    tmp = Path(tempfile.mkdtemp(prefix="in-", dir=folder()))  # 0700, created exclusively
    try:
        path = tmp / FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read(path: str) -> str:
    """What `holding` wrote (in the child)."""
    return Path(path).read_text(encoding="utf-8")
