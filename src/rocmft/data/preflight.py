"""Everything `rocmft data` can refuse before the first row is read: the name, the input, the outputs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..io.problems import Problem
from . import filekind, registry
from .files import rel, same_file
from .options import Options

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_name(name: str | None) -> list[Problem]:
    if not name:
        return [Problem("", "NAME", "missing: the name to register the dataset under", "e.g. NAME=my_data")]
    if not NAME_RE.match(name) or ".." in name or name.endswith((".jsonl", ".json")) or name == "dataset_info":
        return [Problem("", "NAME", f"`{name}` is not a usable dataset name",
                        "letters, digits, `_`, `-` and `.` only, starting with a letter or digit, no extension "
                        "(it names the file data/<NAME>.jsonl and the dataset_info.json entry)")]
    return []


def _first_byte(path: Path) -> bytes:
    """The first byte that is not whitespace or a UTF-8 BOM (b'' for an empty or blank file)."""
    with open(path, "rb") as fh:
        head = fh.read(3)
        if head != b"\xef\xbb\xbf":
            fh.seek(0)
        while True:
            chunk = fh.read(65536)
            if not chunk:
                return b""
            stripped = chunk.lstrip()
            if stripped:
                return stripped[:1]


def _reader_options(opts: Options, kind: str) -> list[Problem]:
    """CONVERT= and FORMAT= against what the file is."""
    src, problems = opts.source, []
    if kind == filekind.TEXT:
        if opts.convert:
            problems.append(Problem(str(src), "CONVERT", "a .txt file is plain text, one document per line, not a JSON array",
                                    "drop CONVERT=1"))
        if opts.fmt not in ("auto", "text"):
            problems.append(Problem(str(src), "FORMAT", f"a .txt file is plain text (FORMAT=text), not {opts.fmt}",
                                    "drop FORMAT=, or give the JSONL file"))
    elif opts.convert and kind != filekind.ARRAY:
        problems.append(Problem(str(src), "CONVERT", f"the file is {filekind.SHOWN[kind]}, not a JSON array (it does not "
                                "start with `[`)", "drop CONVERT=1: every format is read as what it is"))
    return problems


def preflight(opts: Options) -> list[Problem]:
    """Everything that can be refused before the first row is read, all reported together."""
    problems: list[Problem] = []
    src = opts.source
    if not opts.check_only or opts.name:
        problems += check_name(opts.name)
    if not src.exists():
        problems.append(Problem(str(src), "IN", "file not found"))
    elif src.is_dir():
        problems.append(Problem(str(src), "IN", "is a folder, not a file", "give one .jsonl file"))
    elif not os.access(src, os.R_OK):
        problems.append(Problem(str(src), "IN", "cannot be read (permission denied)"))
    elif src.stat().st_size == 0:
        problems.append(Problem(str(src), "IN", "is empty: there are no rows to register"))
    else:
        first = _first_byte(src)
        kind, refused = filekind.kind_of(src, first)
        if refused is not None:
            problems.append(refused)
        elif first == b"" and kind not in filekind.TABLES:
            problems.append(Problem(str(src), "IN", "holds only blank lines: there are no rows to register"))
        else:
            opts.kind = kind
            problems += _reader_options(opts, kind)
    if opts.check_only or problems:
        return problems
    data_dir = opts.data_dir
    if data_dir.exists() and not data_dir.is_dir():
        return [Problem(str(data_dir), "DATA_DIR", "is not a folder")]
    out = data_dir / f"{opts.name}.jsonl"
    rejects = data_dir / f"{opts.name}.rejects.jsonl"
    if same_file(src, rejects) or same_file(src, registry.path(data_dir)):
        problems.append(Problem(str(src), "IN", f"is one of the files this run writes ({rejects.name} or {registry.FILE_NAME})",
                                "copy it elsewhere first or pick another NAME="))
    if out.exists() and not same_file(src, out) and not opts.force:
        problems.append(Problem(str(out), "NAME", f"{rel(out)} exists already and is not IN",
                                "pick another NAME=, or FORCE=1 to replace it"))
    if data_dir.is_dir():
        problems += registry.conflict(data_dir, opts.name, opts.force)
    return problems
