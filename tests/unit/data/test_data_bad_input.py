"""Bad input at the file level: each is refused (or handled) with one clear line, and nothing the user
gave is modified."""

from __future__ import annotations

import json
import os

import pytest

from rocmft.data import prepare
from rocmft.io.problems import ProblemReport

from .helpers import ALPACA, MESSAGES, SHAREGPT, digest, line, registry, rejects, run, write


def refused(src, data_dir, name="ds", **kw) -> str:
    before = digest(src) if src.is_file() else None
    with pytest.raises(ProblemReport) as info:
        run(src, data_dir, name, **kw)
    if before is not None:
        assert digest(src) == before  # never modified
    return str(info.value)


def test_file_not_found(tmp_path):
    assert "error: " + str(tmp_path / "nope.jsonl") + ": IN: file not found" in refused(tmp_path / "nope.jsonl", tmp_path / "data")


def test_a_folder(tmp_path):
    assert "is a folder" in refused(tmp_path, tmp_path / "data")


def test_empty_file(tmp_path):
    src = write(tmp_path / "in.jsonl")
    assert "is empty" in refused(src, tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_only_blank_lines(tmp_path):
    src = write(tmp_path / "in.jsonl", b"\n \n\t\n")
    assert "only blank lines" in refused(src, tmp_path / "data")


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_array_is_read_as_llamafactory_reads_it_without_convert(tmp_path, suffix):
    """LLaMA-Factory's json builder reads an array whatever the extension (pandas' read_json when pyarrow's
    JSON Lines reader fails): so does `make data`, CONVERT=1 or not."""
    src = tmp_path / f"in{suffix}"
    src.write_text(json.dumps([ALPACA, {**ALPACA, "output": "two"}], indent=2))
    summary = run(src, tmp_path / "data")
    assert (summary.rows, summary.kept, summary.unit) == (2, 2, "element")
    assert [json.loads(x) for x in (tmp_path / "data" / "ds.jsonl").read_text().splitlines()][1]["output"] == "two"


def test_json_array_converted(tmp_path):
    src = tmp_path / "in.json"
    rows = [ALPACA, {"instruction": "", "output": "x"}, 3, {**ALPACA, "output": "ünïcode ✓"}]
    src.write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    before = digest(src)
    summary = run(src, tmp_path / "data", convert=True)
    assert digest(src) == before
    assert (summary.rows, summary.kept, dict(summary.rejected)) == (4, 2, {"empty_content": 1, "not_an_object": 1})
    out = [json.loads(x) for x in (tmp_path / "data" / "ds.jsonl").read_text().splitlines()]
    assert out == [rows[0], rows[3]]
    assert [(r["element"], r["reason"]) for r in rejects(tmp_path / "data")] == [(2, "empty_content"), (3, "not_an_object")]
    assert registry(tmp_path / "data")["ds"]["file_name"] == "ds.jsonl"


def test_broken_json_array_is_refused_and_nothing_written(tmp_path):
    src = tmp_path / "in.json"
    src.write_text('[{"instruction": "a", "output": "b"}, {"instruction": ')
    assert "JSON array is malformed" in refused(src, tmp_path / "data", convert=True)
    assert not (tmp_path / "data" / "ds.jsonl").exists()
    assert not list((tmp_path / "data").glob(".*tmp*"))


def test_convert_on_a_jsonl_file_is_refused(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA)
    assert "not a JSON array" in refused(src, tmp_path / "data", convert=True)


def test_mixed_formats_majority_kept_others_rejected_and_noted(tmp_path):
    src = write(tmp_path / "in.jsonl", MESSAGES, SHAREGPT, MESSAGES, ALPACA, MESSAGES)
    summary = run(src, tmp_path / "data")
    assert summary.fmt == "messages" and summary.kept == 3
    assert dict(summary.rejected) == {"mixed_format": 2}
    assert dict(summary.other_formats) == {"sharegpt": 1, "alpaca": 1}
    assert "in another format than messages" in "\n".join(prepare.report(summary))
    assert [r["line"] for r in rejects(tmp_path / "data")] == [2, 4]


def test_mixed_formats_with_explicit_format(tmp_path):
    src = write(tmp_path / "in.jsonl", MESSAGES, SHAREGPT, SHAREGPT)
    summary = run(src, tmp_path / "data", fmt="sharegpt")
    assert summary.kept == 2 and dict(summary.rejected) == {"mixed_format": 1}
    assert "FORMAT=sharegpt" in rejects(tmp_path / "data")[0]["detail"]


def test_no_valid_rows_refused_but_rejects_written(tmp_path):
    src = write(tmp_path / "in.jsonl", b"nope\n", b"[]\n")
    assert "no valid rows: all 2 were rejected" in refused(src, tmp_path / "data")
    assert len(rejects(tmp_path / "data")) == 2
    assert not (tmp_path / "data" / "ds.jsonl").exists()
    assert not (tmp_path / "data" / "dataset_info.json").exists()


def test_pretty_printed_json_document_is_named(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(ALPACA, indent=2))
    assert "one pretty-printed JSON document" in refused(src, tmp_path / "data")


PEAK_RSS = """
import resource, sys
from pathlib import Path
from rocmft.data import prepare
summary = prepare.run(prepare.Options(source=Path(sys.argv[1]), name="ds", data_dir=Path(sys.argv[2])))
print(summary.kept, dict(summary.rejected), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _peak_rss(src, data_dir) -> tuple[str, int]:
    """`prepare` on `src` in a fresh interpreter: (its summary, its peak resident set in bytes)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", PEAK_RSS, str(src), str(data_dir)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    *summary, peak = proc.stdout.split()
    return " ".join(summary), int(peak)


def test_100_mb_single_line_rejected_without_reading_it_whole(tmp_path):
    """Measured: the process that reads a file with a 100 MiB line peaks less than 25 MiB above the same
    process on a small file (holding the line once would add 100 MiB)."""
    big = 100 << 20
    src = tmp_path / "in.jsonl"
    with open(src, "wb") as fh:
        fh.write(line(ALPACA))
        fh.write(b'{"instruction": "' + b"x" * big + b'", "output": "y"}\n')
        fh.write(line(ALPACA))
    summary, peak = _peak_rss(src, tmp_path / "data")
    assert summary == "2 {'line_too_long': 1}"
    rec = rejects(tmp_path / "data")[0]
    assert rec["line"] == 2 and rec["bytes"] > big and "text" not in rec
    assert (tmp_path / "data" / "ds.jsonl").read_bytes() == line(ALPACA) * 2
    _, baseline = _peak_rss(write(tmp_path / "small.jsonl", ALPACA, ALPACA), tmp_path / "small")
    assert peak - baseline < big // 4, f"peak RSS {peak >> 20} MiB against {baseline >> 20} MiB on a small file"


def test_line_limit_is_configurable(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA, {**ALPACA, "output": "y" * 5000})
    summary = run(src, tmp_path / "data", max_line_bytes=1000)
    assert dict(summary.rejected) == {"line_too_long": 1} and summary.kept == 1


@pytest.mark.parametrize("name", ["a/b", "../up", "x;rm -rf ~", "a b", "$(id)", "`id`", "x'y", "name.jsonl",
                                  "-flag", ".hidden", "", "dataset_info", "a|b", "a>b", "a\nb", "a*"])
def test_names_with_separators_or_shell_metacharacters_refused(tmp_path, name):
    src = write(tmp_path / "in.jsonl", ALPACA)
    text = refused(src, tmp_path / "data", name)
    assert "NAME" in text
    assert not (tmp_path / "data").exists()


def test_existing_output_file_refused_without_force(tmp_path):
    data = tmp_path / "data"
    write(data / "ds.jsonl", b"keep me\n")
    src = write(tmp_path / "in.jsonl", ALPACA)
    assert "exists already" in refused(src, data)
    assert (data / "ds.jsonl").read_bytes() == b"keep me\n"
    run(src, data, force=True)
    assert (data / "ds.jsonl").read_bytes() == line(ALPACA)


def test_in_equal_to_the_output_and_clean_is_registered_in_place(tmp_path):
    data = tmp_path / "data"
    src = write(data / "ds.jsonl", ALPACA, ALPACA)
    before, mtime = digest(src), os.stat(src).st_mtime_ns
    summary = run(src, data)
    assert summary.in_place and digest(src) == before and os.stat(src).st_mtime_ns == mtime
    assert registry(data)["ds"]["file_name"] == "ds.jsonl"


def test_in_equal_to_the_output_with_bad_rows_is_never_clobbered(tmp_path):
    data = tmp_path / "data"
    src = write(data / "ds.jsonl", ALPACA, b"bad\n", ALPACA)
    text = refused(src, data)
    assert "data/ds.jsonl itself" in text and "never modified" in text and "another NAME" in text
    assert not (data / "dataset_info.json").exists()
    assert [r["line"] for r in rejects(data)] == [2]  # the rejects still say what is wrong
    assert not list(data.glob(".*tmp*"))


def test_clean_file_elsewhere_in_data_registered_in_place(tmp_path):
    data = tmp_path / "data"
    src = write(data / "sub" / "mine.jsonl", MESSAGES)
    summary = run(src, data, "other")
    assert summary.in_place and registry(data)["other"]["file_name"] == os.path.join("sub", "mine.jsonl")
    assert not (data / "other.jsonl").exists()


def test_dirty_file_in_data_gets_a_clean_copy(tmp_path):
    data = tmp_path / "data"
    src = write(data / "mine.jsonl", MESSAGES, b"junk\n", MESSAGES)
    before = digest(src)
    summary = run(src, data, "other")
    assert not summary.in_place and digest(src) == before
    assert (data / "other.jsonl").read_bytes() == line(MESSAGES) * 2


def test_in_equal_to_the_rejects_file_refused(tmp_path):
    data = tmp_path / "data"
    src = write(data / "ds.rejects.jsonl", ALPACA)
    assert "one of the files this run writes" in refused(src, data)


def test_check_only_writes_nothing(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA, b"bad\n")
    summary = run(src, tmp_path / "data", None, check_only=True)
    assert summary.kept == 1 and summary.n_rejected == 1
    assert not (tmp_path / "data").exists()


def test_no_temporary_files_left_after_success(tmp_path):
    src = write(tmp_path / "in.jsonl", ALPACA, b"bad\n")
    run(src, tmp_path / "data")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["dataset_info.json", "ds.jsonl", "ds.rejects.jsonl"]


def test_stale_rejects_removed_when_a_forced_rerun_is_clean(tmp_path):
    data = tmp_path / "data"
    run(write(tmp_path / "in.jsonl", ALPACA, b"bad\n"), data)
    assert (data / "ds.rejects.jsonl").exists()
    run(write(tmp_path / "in.jsonl", ALPACA), data, force=True)
    assert not (data / "ds.rejects.jsonl").exists()


def test_progress_bar_runs(tmp_path):
    src = write(tmp_path / "in.jsonl", *([ALPACA] * 5000))
    assert run(src, tmp_path / "data", progress=True).kept == 5000


def test_output_name_linked_to_in_is_never_written_through(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    src = write(tmp_path / "in.jsonl", ALPACA, b"bad\n")
    (data / "ds.jsonl").symlink_to(src)
    before = digest(src)
    assert "itself" in refused(src, data)
    assert digest(src) == before and (data / "ds.jsonl").is_symlink()
