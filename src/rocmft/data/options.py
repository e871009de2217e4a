"""What `rocmft data` is asked to do: the input, the name, the checks and what to write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_LINE_MB = 16


@dataclass(frozen=True)
class Split:
    """How LLaMA-Factory holds rows out of training for a recipe (data/data_utils.py split_dataset)."""

    recipe: str
    val_size: float
    seed: int = 42  # transformers' TrainingArguments default
    max_samples: int | None = None


@dataclass
class Options:
    source: Path
    name: str | None
    data_dir: Path
    fmt: str = "auto"  # auto | one of formats.FORMATS
    force: bool = False
    check_only: bool = False  # read and report; write and register nothing
    convert: bool = False  # the input must be one JSON array of rows (one is read as such anyway)
    dedup: bool = False  # drop a row that repeats an earlier one exactly (DEDUP=1); counted either way
    max_line_bytes: int = DEFAULT_MAX_LINE_MB << 20
    tokenizer: str | None = None
    template: str | None = None
    cutoff_len: int | None = None
    recipe: str | None = None
    progress: bool | None = None  # None: a bar when stderr is a terminal and the file is large
    split: Split | None = None  # how the recipe holds rows out (val_size): duplicates across it are counted
    kind: str = ""  # the reader (data/filekind.py), set by preflight
    workspace: bool = False  # data_dir is the user's default folder: its registry lists the shipped entries too

    @property
    def text_file(self) -> bool:
        """A .txt file: one pretraining document per line (not JSON)."""
        return self.source.suffix.lower() == ".txt"

    @property
    def unit(self) -> str:
        """What a row's number counts in the summary and the rejects: a line of the file, or a row of a table."""
        return "line" if self.kind in ("jsonl", "text", "") else "element" if self.kind == "array" else "row"
