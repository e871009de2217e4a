"""Parquet and CSV rows as LLaMA-Factory's loader gets them: through the `datasets` builders' own readers
(datasets/packaged_modules: parquet reads record batches with pyarrow; csv reads pandas.read_csv chunks of
10,000 rows with pandas' defaults and turns each into a pyarrow table), each row then a dict as `to_pylist`
gives it: an empty CSV cell is None, a column of numbers holds numbers (a number where a string belongs is
then rejected like in JSONL: `wrong_type`).

pyarrow and pandas come with the training stack (`make setup`), not with the light host: without them the
file is refused in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..io.problems import Problem, ProblemReport
from .filekind import CSV, PARQUET, SHOWN

CSV_CHUNK = 10_000  # datasets' CsvConfig.chunksize


def _need(kind: str, path: Path):
    try:
        import pyarrow  # noqa: F401
        if kind == CSV:
            import pandas  # noqa: F401
    except ImportError as exc:
        raise ProblemReport([Problem(str(path), "IN", f"is {SHOWN[kind]}: reading it needs {exc.name}, which this "
                                     "light host lacks", "run `make setup` (the CPU training stack), or give JSON Lines")]) from None


def _broken(kind: str, path: Path, exc: Exception, before: int) -> ProblemReport:
    reason = " ".join(str(exc).split())[:300] or type(exc).__name__
    return ProblemReport([Problem(str(path), "IN", f"is not a readable {SHOWN[kind]} file: {reason}",
                                  f"{before:,} rows before it were read; LLaMA-Factory's loader would fail on it too")])


def rows(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    """Each row of a Parquet or CSV file, in file order; ProblemReport when the file itself cannot be read."""
    _need(kind, path)
    import pyarrow as pa

    count = 0
    try:
        if kind == PARQUET:
            import pyarrow.parquet as pq

            batches = (pa.Table.from_batches([b]) for b in pq.ParquetFile(path).iter_batches())
        else:
            import pandas as pd

            batches = (pa.Table.from_pandas(df) for df in pd.read_csv(path, iterator=True, chunksize=CSV_CHUNK))
        for table in batches:
            for row in table.to_pylist():
                count += 1
                yield row
    except (pa.ArrowException, ValueError, UnicodeDecodeError, OSError) as exc:  # pandas' ParserError is a ValueError
        raise _broken(kind, path, exc, count) from None
