"""Outputs written to a temporary file in the data folder and renamed into place only when the pass succeeded."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .reader import CHUNK


class Writer:
    """A temporary file in the data folder, renamed into place on commit, removed otherwise.
    With `lazy_prefix_of` set, nothing is written until the first row that differs from the input: the
    input's bytes before it are then copied, so a clean file already in data/ costs no write at all."""

    def __init__(self, target: Path, lazy: bool = False, lazy_prefix_of: Path | None = None) -> None:
        self.target = target
        self.tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        self.fh = None
        self.lazy_prefix_of = lazy_prefix_of
        if not lazy and lazy_prefix_of is None:
            self.open(0)

    def open(self, prefix_bytes: int) -> None:
        self.fh = open(self.tmp, "wb", buffering=CHUNK)
        if prefix_bytes and self.lazy_prefix_of is not None:
            with open(self.lazy_prefix_of, "rb") as src:
                left = prefix_bytes
                while left:
                    chunk = src.read(min(CHUNK, left))
                    if not chunk:
                        break
                    self.fh.write(chunk)
                    left -= len(chunk)

    def commit(self) -> None:
        if self.fh is not None:
            self.fh.flush()
            os.fsync(self.fh.fileno())
            self.fh.close()
            self.fh = None
            os.replace(self.tmp, self.target)

    def discard(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()
