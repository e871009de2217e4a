"""What `rocmft data` is asked to do: the input, the name, the checks and what to write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_LINE_MB = 16


@dataclass
class Options:
    source: Path
    name: str | None
    data_dir: Path
    fmt: str = "auto"  # auto | one of formats.FORMATS
    force: bool = False
    check_only: bool = False  # read and report; write and register nothing
    convert: bool = False  # the input is one JSON array of rows
    max_line_bytes: int = DEFAULT_MAX_LINE_MB << 20
    tokenizer: str | None = None
    template: str | None = None
    cutoff_len: int | None = None
    recipe: str | None = None
    progress: bool | None = None  # None: a bar when stderr is a terminal and the file is large

    @property
    def text_file(self) -> bool:
        """A .txt file: one pretraining document per line (not JSON)."""
        return self.source.suffix.lower() == ".txt"
