"""Which reader a user's file gets: the one LLaMA-Factory's loader would pick, or one line saying why none.

LLaMA-Factory loads a local dataset with the `datasets` builder named by the file's extension
(llamafactory/extras/constants.py FILEEXT2TYPE: json/jsonl -> json, csv, parquet, arrow, txt -> text). Its json
builder reads JSON Lines and, when pyarrow cannot, one JSON array of rows (pandas' read_json), whatever the
extension says. `make data` reads each the same way and writes the kept rows as JSONL; what it cannot read is
refused by name, never read line by line as JSONL (a Parquet file's bytes would be "41 rows read, 0 kept").
"""

from __future__ import annotations

from pathlib import Path

from ..io.problems import Problem

JSONL, ARRAY, TEXT, PARQUET, CSV = "jsonl", "array", "text", "parquet", "csv"
TABLES = (PARQUET, CSV)  # read through pyarrow/pandas, as the `datasets` builders read them
SHOWN = {JSONL: "JSON Lines", ARRAY: "a JSON array", TEXT: "plain text", PARQUET: "Parquet", CSV: "CSV"}

# The first bytes of formats nobody should read as text. Parquet is read; the others are named and refused.
PARQUET_MAGIC = b"PAR1"
REFUSED_MAGIC = {
    b"ARROW1": "an Arrow IPC file",
    b"\xff\xff\xff\xff": "an Arrow IPC stream",
    b"\x1f\x8b": "gzip-compressed",
    b"PK\x03\x04": "a zip archive (or an Excel workbook)",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
    b"BZh": "bzip2-compressed",
    b"\xfd7zXZ\x00": "xz-compressed",
    b"SQLite format 3\x00": "an SQLite database",
}
REFUSED_SUFFIX = {".arrow": "an Arrow file", ".tsv": "tab-separated (TSV)", ".xlsx": "an Excel workbook",
                  ".gz": "gzip-compressed", ".zip": "a zip archive", ".zst": "zstd-compressed"}
WHAT_TO_GIVE = "give JSON Lines, a JSON array, Parquet, CSV or .txt (one document per line)"


def _head(path: Path, size: int = 64) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def kind_of(path: Path, first_byte: bytes) -> tuple[str | None, Problem | None]:
    """(the reader for `path`, or None with the one line that refuses it). `first_byte`: its first byte that is
    not whitespace or a BOM (preflight reads it)."""
    head = _head(path)
    suffix = path.suffix.lower()
    if head.startswith(PARQUET_MAGIC) or suffix == ".parquet":
        if not head.startswith(PARQUET_MAGIC):
            return None, Problem(str(path), "IN", "is named .parquet but is not a Parquet file (no PAR1 header)",
                                 WHAT_TO_GIVE)
        return PARQUET, None
    for magic, what in REFUSED_MAGIC.items():
        if head.startswith(magic):
            return None, Problem(str(path), "IN", f"is {what}: `make data` does not read it", _fix(what))
    if suffix in REFUSED_SUFFIX:
        what = REFUSED_SUFFIX[suffix]
        return None, Problem(str(path), "IN", f"is {what}: `make data` does not read it", _fix(what))
    if suffix == ".csv":
        return CSV, None
    if suffix == ".txt":
        return TEXT, None
    return (ARRAY if first_byte == b"[" else JSONL), None


def _fix(what: str) -> str:
    if "compressed" in what or "zip" in what:
        return f"decompress it first; {WHAT_TO_GIVE}"
    if "Arrow" in what:
        return "write it as Parquet (pyarrow.parquet.write_table) or JSON Lines"
    return WHAT_TO_GIVE
