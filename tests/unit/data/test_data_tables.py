"""Parquet and CSV read as LLaMA-Factory's loader reads them (the `datasets` builders by extension), other binary
formats refused in one line naming the format; nothing is ever read as JSON Lines by mistake."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from rocmft.data.summary import report
from rocmft.io.problems import ProblemReport

from .helpers import ALPACA, MESSAGES, line, run, write


def _parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=16)  # several row groups: read them all
    return path


def _datasets_rows(builder: str, path, tmp_path) -> list[dict]:
    from datasets import load_dataset

    return load_dataset(builder, data_files=str(path), split="train", cache_dir=str(tmp_path / "cache")).to_list()


def test_a_parquet_file_is_read_as_rows_not_as_lines(tmp_path, monkeypatch):
    """The issue's file: 41 rows of Parquet were "41 rows read, 0 kept ... nul_byte 27"."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rows = [{**ALPACA, "output": f"answer {i}"} for i in range(40)] + [{**ALPACA, "output": ""}]
    src = _parquet(tmp_path / "in.parquet", rows)
    summary = run(src, tmp_path / "data")
    assert (summary.rows, summary.kept, dict(summary.rejected), summary.unit) == (41, 40, {"empty_content": 1}, "row")
    written = [json.loads(x) for x in (tmp_path / "data" / "ds.jsonl").read_text().splitlines()]
    assert written == _datasets_rows("parquet", src, tmp_path)[:40]  # the rows LLaMA-Factory would have read
    assert "41 rows read, 40 kept, 1 rejected (alpaca)" in report(summary)[0]


def test_parquet_nested_turns_and_a_named_file_that_is_not_parquet(tmp_path):
    src = _parquet(tmp_path / "chat.parquet", [MESSAGES, MESSAGES])
    summary = run(src, tmp_path / "data", check_only=True)
    assert (summary.fmt, summary.kept, summary.duplicates) == ("messages", 2, 1)
    fake = write(tmp_path / "fake.parquet", ALPACA)
    with pytest.raises(ProblemReport, match="named .parquet but is not a Parquet file"):
        run(fake, tmp_path / "data", check_only=True)


def test_csv_cells_as_pandas_reads_them(tmp_path, monkeypatch):
    """datasets' csv builder: pandas.read_csv, then pyarrow: an empty cell is None (an absent `input`), a column
    of numbers is numbers, which LLaMA-Factory would put in a chat turn: rejected as wrong_type."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    src = tmp_path / "in.csv"
    src.write_text('instruction,input,output\nWhat is ROCm?,,"AMD\'s stack, open"\nSay ""hi"",x,hi\n')
    summary = run(src, tmp_path / "data")
    written = [json.loads(x) for x in (tmp_path / "data" / "ds.jsonl").read_text().splitlines()]
    assert written == _datasets_rows("csv", src, tmp_path)
    assert written[0] == {"instruction": "What is ROCm?", "input": None, "output": "AMD's stack, open"}
    numbers = tmp_path / "n.csv"
    numbers.write_text("instruction,output\n2+2?,4\n3+3?,6\n")
    assert dict(run(numbers, tmp_path / "n", check_only=True).rejected) == {"wrong_type": 2}


def test_a_broken_csv_is_one_line(tmp_path):
    src = tmp_path / "in.csv"
    src.write_bytes(b"instruction,output\nok,fine\n\xff\xfe,bad\n")
    with pytest.raises(ProblemReport) as info:
        run(src, tmp_path / "data")
    [problem] = info.value.problems
    assert "is not a readable CSV file" in problem.message
    assert not (tmp_path / "data" / "ds.jsonl").exists()


@pytest.mark.parametrize("name, body, what", [
    ("in.jsonl.gz", gzip.compress(line(ALPACA)), "gzip-compressed"),
    ("in.arrow", b"ARROW1\x00\x00rest", "an Arrow IPC file"),
    ("in.jsonl", b"PK\x03\x04rest", "a zip archive (or an Excel workbook)"),
    ("in.tsv", b"instruction\toutput\na\tb\n", "tab-separated (TSV)"),
])
def test_other_formats_are_refused_by_name(tmp_path, name, body, what):
    src = tmp_path / name
    src.write_bytes(body)
    with pytest.raises(ProblemReport) as info:
        run(src, tmp_path / "data")
    [problem] = info.value.problems
    assert problem.message == f"is {what}: `make data` does not read it"
    assert not (tmp_path / "data").exists()


def test_the_light_host_refuses_parquet_in_one_line(tmp_path):
    """Without pyarrow (the light host: `make host`), the file is refused by name, not misread."""
    src = _parquet(tmp_path / "in.parquet", [ALPACA])
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from rocmft.cli import main as cli\n"
            f"sys.exit(cli.main(['data', {str(src)!r}, '--check']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [err] = proc.stderr.strip().splitlines()
    assert "IN: is Parquet: reading it needs pyarrow, which this light host lacks" in err and "make setup" in err
