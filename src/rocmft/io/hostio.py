"""Files the host writes into, and reads back from, folders a job could also reach.

A run dir is shared with code rocmft did not write: a model's remote code, a pickled checkpoint, a recipe's
command line, inside a container that runs as your uid. Only the run dir's job folder (runs.JOB_DIR) is
mounted writable into a container, but a run dir made by an older rocmft, a `make shell` (every run dir
writable) or a RUNTIME=local run reaches the rest too. So every file the host writes in a run dir:
  - is created under a unique name, exclusively and without following a link (O_CREAT|O_EXCL|O_NOFOLLOW,
    relative to the directory opened once: dir_fd), then renamed over the target inside that directory. A
    rename replaces a symlink planted at the target; it never writes through it.
  - appends (train.log) only to a regular file of ours with one link, opened without following a link.
And what the host reads back from a job is data to check, never to trust: regular files only, read without
following a link, at most a size cap, parsed into the type the caller expects (None otherwise).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
JSON_LIMIT = 8 * 1024 * 1024  # a status, a report, a metrics file: kilobytes; anything near this is not ours
LOG_LIMIT = 256 * 1024 * 1024  # a progress or trainer log of a very long run (~300 bytes a logged step)


class UnsafeFile(OSError):
    """The host refused to write a file: something not a regular file of ours stands at its name."""


def _open_dir(directory: Path) -> int:
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)


def write_bytes(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    """Create or replace `path` whole: written under a fresh unique name, then renamed over it."""
    path = Path(path)
    dfd = _open_dir(path.parent)
    try:
        for _ in range(16):
            tmp = f".{path.name}.{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
                break
            except FileExistsError:
                continue
        else:
            raise UnsafeFile(f"could not create a temporary file beside {path}")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)


def write_text(path: Path | str, text: str, mode: int = 0o644) -> None:
    write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: Path | str, data: Any, mode: int = 0o644) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n", mode)


def open_append(path: Path | str, mode: int = 0o644) -> IO[bytes]:
    """`open(path, "ab")` that never writes through a link: a symlink, a FIFO, a device, a hard link to another
    file or a file of another user at the name is refused (UnsafeFile)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFile(f"{path} is a symbolic link: not written through") from None
        if exc.errno in (errno.ENXIO, errno.ELOOP):  # a FIFO nobody reads, a socket
            raise UnsafeFile(f"{path} is not a regular file: not appended to") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.getuid():
        os.close(fd)
        raise UnsafeFile(f"{path} is not a regular file of this user with a single link: not appended to")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab")


def open_regular(path: Path | str) -> IO[bytes] | None:
    """A regular file opened for reading without following a link and without waiting on a FIFO; None for
    anything else (missing, a link, a FIFO, a device, a folder). The caller reads within its own bounds."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def is_regular(path: Path | str) -> bool:
    """A regular file at `path` itself (a link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_folder(path: Path | str) -> bool:
    """A folder at `path` itself (a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_bytes(path: Path | str, limit: int = JSON_LIMIT, offset: int = 0) -> bytes | None:
    """A regular file's bytes from `offset`, read without following a link; None when it is missing, not a
    regular file, or larger than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], limit - offset + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return None if offset + len(data) > limit else data
    finally:
        os.close(fd)


def read_text(path: Path | str, limit: int = JSON_LIMIT) -> str | None:
    data = read_bytes(path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def read_json(path: Path | str, kind: type = dict, limit: int = JSON_LIMIT) -> Any:
    """The JSON value in `path` when it is a `kind` (dict by default); None for anything else."""
    text = read_text(path, limit)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, kind) else None
