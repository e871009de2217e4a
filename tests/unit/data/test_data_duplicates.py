"""Exact duplicate rows: counted always, dropped with DEDUP=1, and the held-out rows that are copies of training
rows counted on the split LLaMA-Factory itself makes (its split_dataset over the `datasets` json loader)."""

from __future__ import annotations

import json
import random

import pytest

from rocmft.data import heldout
from rocmft.data.options import Split
from rocmft.data.summary import report

from .helpers import ALPACA, line, registry, run, write

SPLIT = Split("tiny-cpu", 0.1, 42)


def _rows(n_distinct: int, n_copies: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    rows = [{"instruction": f"What is {i} + {i}?", "input": "", "output": str(2 * i)} for i in range(n_distinct)]
    out = rows + [rng.choice(rows) for _ in range(n_copies)]
    rng.shuffle(out)
    return out


def test_duplicates_counted_and_kept_without_dedup(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA, {**ALPACA, "output": "other"}, ALPACA, b"\r\n", line(ALPACA).replace(b"\n", b"\r\n"))
    summary = run(src, tmp_path / "data", split=SPLIT)
    # the CRLF copy is the same row once its line ending is made "\n" (what the written file holds)
    assert (summary.rows, summary.kept, summary.duplicates, summary.first_duplicate) == (4, 4, 2, 3)
    text = "\n".join(report(summary))
    assert "2 rows (50.0%) repeat an earlier row exactly (first at line 3): kept; DEDUP=1 drops them" in text
    assert len((tmp_path / "data" / "ds.jsonl").read_text().splitlines()) == 4


def test_dedup_drops_them_and_says_so(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA, {**ALPACA, "output": "other"}, ALPACA, ALPACA)
    summary = run(src, tmp_path / "data", dedup=True)
    assert (summary.kept, summary.duplicates, summary.dropped_duplicates) == (2, 2, 2)
    assert [json.loads(x)["output"] for x in (tmp_path / "data" / "ds.jsonl").read_text().splitlines()] == \
        [ALPACA["output"], "other"]
    assert "2 rows (50.0%) repeat an earlier row exactly (first at line 3): 2 dropped (DEDUP=1)" in "\n".join(report(summary))
    assert registry(tmp_path / "data")["ds"]["file_name"] == "ds.jsonl"


def test_a_clean_file_in_the_data_folder_with_copies_is_never_rewritten(tmp_path):
    data = tmp_path / "data"
    src = write(data / "mine.jsonl", ALPACA, ALPACA)
    with pytest.raises(Exception, match="1 lines to drop or fix"):
        run(src, data, name="mine", dedup=True)
    assert src.read_bytes() == line(ALPACA) * 2


def test_dedup_in_arrays_tables_and_text(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps([ALPACA, ALPACA, {**ALPACA, "output": "b"}]))
    assert (run(src, tmp_path / "a", dedup=True).kept, run(src, tmp_path / "b").duplicates) == (2, 1)
    txt = tmp_path / "in.txt"
    txt.write_text("one doc\n\nanother\none doc\n")
    assert run(txt, tmp_path / "c", dedup=True).kept == 2


def test_held_out_copies_match_llamafactorys_own_split(tmp_path, monkeypatch):
    """The count is the split LLaMA-Factory makes: its split_dataset (data_utils.py) on the rows its loader
    reads (`datasets`' json builder), with tiny-cpu's val_size and seed."""
    from datasets import load_dataset
    from llamafactory.data.data_utils import split_dataset
    from llamafactory.hparams import DataArguments

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rows = _rows(830, 170)
    src = write(tmp_path / "in.jsonl", *rows)
    summary = run(src, tmp_path / "data", split=SPLIT)
    loaded = load_dataset("json", data_files=str(src), split="train", cache_dir=str(tmp_path / "cache"))
    train, held = split_dataset(loaded, None, DataArguments(dataset="in", val_size=SPLIT.val_size), seed=SPLIT.seed)
    trained = {json.dumps(r, sort_keys=True) for r in train["train"]}
    copies = sum(json.dumps(r, sort_keys=True) in trained for r in held["validation"])
    assert copies > 10  # the file is 17% copies: some held-out rows are trained on
    assert (summary.held_out.held, summary.held_out.copies) == (len(held["validation"]), copies)
    assert f"{copies} are exact copies of a training row" in "\n".join(report(summary))
    deduped = run(src, tmp_path / "data2", split=SPLIT, dedup=True)
    assert deduped.held_out.copies == 0 and "none is a copy of a training row" in "\n".join(report(deduped))


def test_held_out_follows_max_samples_and_a_row_count():
    from array import array

    groups = array("q", [0, 1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert heldout.count(groups, Split("r", 0.0, 42)) is None  # nothing held out
    assert heldout.count(groups, Split("r", 3, 42)).held == 3  # a val_size over 1 is a row count
    assert heldout.count(groups, Split("r", 0.5, 42, max_samples=2)).rows == 2  # max_samples cuts before the split
    assert heldout.count(array("q", [0, 1, 2, 3]), Split("r", 0.5, 7)).copies == 0  # no copies: no split needed
    assert heldout.held_count(0.05, 101) == 6  # datasets rounds a fraction up
