"""Outputs written to a temporary file in the data folder and renamed into place only when the pass succeeded.

The temporary file gets a name nobody can guess and is created exclusively (mkstemp: O_EXCL, 0600): a name
like `.x.jsonl.tmp-<pid>`, planted beforehand as a link by another user of a shared data folder, would have
been opened through the link and written into a file of theirs choosing. The output is made as private as
its input: a 0600 dataset is never copied out 0644."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .reader import CHUNK


def umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def output_mode(like: Path | None) -> int:
    """The permissions a new output gets: a new file's (0666 less the umask), never more open than `like`'s."""
    mode = 0o666 & ~umask()
    if like is not None:
        with contextlib.suppress(OSError):
            mode &= os.stat(like).st_mode & 0o777
    return mode


def temp_beside(target: Path) -> tuple[int, Path]:
    """(fd, path) of a new, exclusively created temporary file next to `target` (same filesystem: renamed)."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    return fd, Path(name)


class Writer:
    """A temporary file in the data folder, renamed into place on commit, removed otherwise.
    With `lazy_prefix_of` set, nothing is written until the first row that differs from the input: the
    input's bytes before it are then copied, so a clean file already in data/ costs no write at all.
    `mode_of`: the input, whose permissions the output never exceeds."""

    def __init__(self, target: Path, lazy: bool = False, lazy_prefix_of: Path | None = None,
                 mode_of: Path | None = None) -> None:
        self.target = target
        self.tmp: Path | None = None
        self.fh = None
        self.lazy_prefix_of = lazy_prefix_of
        self.mode = output_mode(mode_of)
        if not lazy and lazy_prefix_of is None:
            self.open(0)

    def open(self, prefix_bytes: int) -> None:
        fd, self.tmp = temp_beside(self.target)
        self.fh = os.fdopen(fd, "wb", buffering=CHUNK)
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
            os.fchmod(self.fh.fileno(), self.mode)
            os.fsync(self.fh.fileno())
            self.fh.close()
            self.fh = None
            os.replace(self.tmp, self.target)
            self.tmp = None

    def discard(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        if self.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                self.tmp.unlink()
            self.tmp = None
