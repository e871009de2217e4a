"""Each format's good rows pass; each bad-row reason is named, with its line number, in the rejects."""

from __future__ import annotations

import copy
import json

import pytest

from rocmft.data import formats, prepare

from .helpers import ALPACA, GOOD, MESSAGES, SHAREGPT, line, registry, rejects, run, write


def _good_variants():
    yield "alpaca", ALPACA
    yield "alpaca", {"instruction": "Add", "input": "2 and 3", "output": "5", "system": "Be exact.",
                     "history": [["Hi", "Hello"], ["Ready?", "Yes"]]}
    yield "alpaca", {"instruction": "", "input": "only an input", "output": "ok"}
    yield "alpaca", {"instruction": "x", "output": "y", "id": 7}
    yield "sharegpt", SHAREGPT
    yield "sharegpt", {"conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "a"},
                                         {"from": "gpt", "value": "b"}, {"from": "human", "value": "c"},
                                         {"from": "gpt", "value": "d"}]}
    yield "sharegpt", {"conversations": SHAREGPT["conversations"], "system": "a system column"}
    yield "sharegpt", {"conversations": [{"from": "human", "value": "weather?"}, {"from": "function_call", "value": "{}"},
                                         {"from": "observation", "value": "sunny"}, {"from": "gpt", "value": "Sunny."}]}
    yield "messages", MESSAGES
    yield "messages", {"messages": [{"role": "user", "content": "ça va ? 你好 ✓"}, {"role": "assistant", "content": "oui"}]}


@pytest.mark.parametrize("fmt,row", list(_good_variants()))
def test_good_rows_pass_and_count_turns(fmt, row):
    assert formats.detect(row) == fmt
    seen: set = set()
    turns, chars = formats.CHECKS[fmt](row, formats.Columns(), 1, seen)
    assert turns >= 2 and turns % 2 == 0 and chars > 0


def _msg(*turns):
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


def _sg(*turns):
    return {"conversations": [{"from": r, "value": c} for r, c in turns]}


# (what, line bytes or object, the expected reason) -- every reason in formats.REASONS.
BAD = [
    ("invalid utf-8", b'{"instruction": "caf\xe9", "output": "x"}', "invalid_utf8"),
    ("escaped lone surrogate", b'{"instruction": "a\\ud800b", "output": "x"}', "invalid_utf8"),
    ("raw NUL", b'{"instruction": "a\x00b", "output": "x"}', "nul_byte"),
    ("escaped NUL", b'{"instruction": "a\\u0000b", "output": "x"}', "nul_byte"),
    ("truncated JSON", b'{"instruction": "a", "output": "x"', "invalid_json"),
    ("trailing garbage", b'{"instruction": "a", "output": "x"} extra', "invalid_json"),
    ("deep nesting", b"[" * 100000 + b"]" * 100000, "invalid_json"),
    ("an array row", b'["a", "b"]', "not_an_object"),
    ("a string row", b'"text"', "not_an_object"),
    ("no known key", {"body": "hello"}, "unknown_format"),
    ("other format", SHAREGPT, "mixed_format"),
    ("no output", {"instruction": "a"}, "missing_field"),
    ("no instruction", {"output": "a"}, "missing_field"),
    ("null output", {"instruction": "a", "output": None}, "missing_field"),
    ("number output", {"instruction": "a", "output": 5}, "wrong_type"),
    ("list input", {"instruction": "a", "input": ["x"], "output": "b"}, "wrong_type"),
    ("bad history", {"instruction": "a", "output": "b", "history": [["only one"]]}, "wrong_type"),
    ("empty output", {"instruction": "a", "output": ""}, "empty_content"),
    ("blank output", {"instruction": "a", "output": " \n\t"}, "empty_content"),
    ("no prompt", {"instruction": "", "input": "  ", "output": "b"}, "empty_content"),
    ("empty history turn", {"instruction": "a", "output": "b", "history": [["q", ""]]}, "empty_content"),
    ("extra column changes type", {"instruction": "a", "output": "b", "id": "seven"}, "inconsistent_type"),
]
BAD_CHAT = [
    ("no turns", {"messages": []}, "empty_content"),
    ("messages not a list", {"messages": "hi"}, "wrong_type"),
    ("turn not an object", {"messages": ["hi", "there"]}, "wrong_type"),
    ("no content", {"messages": [{"role": "user"}, {"role": "assistant", "content": "x"}]}, "missing_field"),
    ("sharegpt keys in messages", {"messages": [{"from": "human", "value": "a"}]}, "missing_field"),
    ("content not a string", _msg(("user", "a"), ("assistant", 3)), "wrong_type"),
    ("empty content", _msg(("user", "a"), ("assistant", "")), "empty_content"),
    ("only a system turn", _msg(("system", "s")), "empty_content"),
    ("unknown role", _msg(("user", "a"), ("bot", "b")), "unknown_role"),
    ("tool role", _msg(("user", "a"), ("tool", "b")), "unknown_role"),
    ("two users", _msg(("user", "a"), ("user", "b"), ("assistant", "c")), "bad_turn_order"),
    ("assistant first", _msg(("assistant", "a"), ("user", "b")), "bad_turn_order"),
    ("system in the middle", _msg(("user", "a"), ("system", "s"), ("assistant", "b")), "bad_turn_order"),
    ("ends with the user", _msg(("user", "a"), ("assistant", "b"), ("user", "c")), "last_turn_not_assistant"),
    ("turn column changes type", {"messages": [{"role": "user", "content": "a", "weight": []},
                                               {"role": "assistant", "content": "b"}]}, "inconsistent_type"),
]
BAD_SHAREGPT = [
    ("user/assistant in sharegpt", _sg(("user", "a"), ("assistant", "b")), "unknown_role"),
    ("role/content keys in sharegpt", {"conversations": [{"role": "user", "content": "a"}]}, "missing_field"),
    ("gpt first", _sg(("gpt", "a"), ("human", "b")), "bad_turn_order"),
    ("ends with human", _sg(("human", "a")), "last_turn_not_assistant"),
    ("null system column", {"conversations": SHAREGPT["conversations"], "system": 3}, "wrong_type"),
]


def _run_one(tmp_path, fmt, bad, first=None):
    """A file of: a good row, the bad row, a good row. Returns the summary and the rejects."""
    good = copy.deepcopy(first or GOOD[fmt])
    if fmt == "alpaca":
        good["id"] = 1  # so a later `id` of another type is an inconsistent column
    if fmt == "messages":
        good["messages"][1]["weight"] = 1.0
    src = write(tmp_path / "in.jsonl", good, bad + b"\n" if isinstance(bad, bytes) else bad, GOOD[fmt])
    summary = run(src, tmp_path / "data", fmt=fmt)
    return summary, rejects(tmp_path / "data")


@pytest.mark.parametrize("what,bad,reason", BAD, ids=[c[0] for c in BAD])
def test_each_bad_alpaca_row_named_with_line_and_reason(tmp_path, what, bad, reason):
    summary, rej = _run_one(tmp_path, "alpaca", bad)
    assert summary.rejected == {reason: 1}, (what, rej)
    assert summary.kept == 2
    assert rej[0]["line"] == 2 and rej[0]["reason"] == reason and rej[0]["detail"]
    assert rej[0]["offset"] == len(line({**ALPACA, "id": 1}))


@pytest.mark.parametrize("what,bad,reason", BAD_CHAT, ids=[c[0] for c in BAD_CHAT])
def test_each_bad_messages_row(tmp_path, what, bad, reason):
    summary, rej = _run_one(tmp_path, "messages", bad)
    assert summary.rejected == {reason: 1}, (what, rej)
    assert rej[0]["line"] == 2 and rej[0]["text"] == json.dumps(bad, ensure_ascii=False)


@pytest.mark.parametrize("what,bad,reason", BAD_SHAREGPT, ids=[c[0] for c in BAD_SHAREGPT])
def test_each_bad_sharegpt_row(tmp_path, what, bad, reason):
    summary, rej = _run_one(tmp_path, "sharegpt", bad)
    assert summary.rejected == {reason: 1}, (what, rej)


def test_every_reason_is_tested():
    from .test_data_kinds import BAD_KINDS

    tested = {c[2] for c in BAD + BAD_CHAT + BAD_SHAREGPT} | {c[3] for c in BAD_KINDS}
    tested.add("line_too_long")  # see test_data_bad_input
    assert tested == set(formats.REASONS)


def test_good_rows_written_byte_for_byte_and_bad_rows_kept_in_rejects(tmp_path):
    good_a = b'{"instruction":"a","output":"b"}\n'  # compact: a re-serialising script would change it
    good_b = b'{ "instruction" : "c\\u00e9" , "output" : "d" }\n'
    src = write(tmp_path / "in.jsonl", good_a, b"not json\n", good_b, b'{"instruction": "caf\xe9"}\n')
    summary = run(src, tmp_path / "data")
    assert (tmp_path / "data" / "ds.jsonl").read_bytes() == good_a + good_b
    rej = rejects(tmp_path / "data")
    assert [(r["line"], r["reason"]) for r in rej] == [(2, "invalid_json"), (4, "invalid_utf8")]
    assert rej[0]["text"] == "not json"
    assert rej[1]["text_base64"]  # bytes that are not UTF-8 are kept, base64-encoded
    assert summary.rows == 4 and summary.kept == 2 and summary.n_rejected == 2


def test_crlf_bom_blank_lines_and_missing_final_newline(tmp_path):
    src = write(tmp_path / "in.jsonl", b'\xef\xbb\xbf{"instruction":"a","output":"b"}\r\n', b"\n", b"  \r\n",
                b'{"instruction":"c","output":"d"}')
    summary = run(src, tmp_path / "data")
    assert summary.kept == 2 and summary.blank_lines == 2 and not summary.rejected
    assert (tmp_path / "data" / "ds.jsonl").read_bytes() == b'{"instruction":"a","output":"b"}\n{"instruction":"c","output":"d"}\n'


@pytest.mark.parametrize("fmt", ["alpaca", "sharegpt", "messages"])
def test_registered_entry_matches_the_columns_present(tmp_path, fmt):
    src = write(tmp_path / "in.jsonl", GOOD[fmt])
    summary = run(src, tmp_path / "data")
    entry = registry(tmp_path / "data")["ds"]
    assert entry == summary.entry and entry["file_name"] == "ds.jsonl"
    if fmt == "alpaca":
        assert entry["formatting"] == "alpaca"
        assert entry["columns"] == {"prompt": "instruction", "query": "input", "response": "output"}
    else:
        assert entry["formatting"] == "sharegpt"
        assert entry["columns"] == {"messages": "conversations" if fmt == "sharegpt" else "messages"}
        assert entry["tags"]["role_tag"] == ("from" if fmt == "sharegpt" else "role")
        assert entry["tags"]["user_tag"] == ("human" if fmt == "sharegpt" else "user")


def test_optional_columns_named_only_when_present(tmp_path):
    src = write(tmp_path / "in.jsonl", {"instruction": "a", "output": "b"},
                {"instruction": "a", "output": "b", "system": "s", "history": [["q", "r"]]})
    run(src, tmp_path / "data")
    cols = registry(tmp_path / "data")["ds"]["columns"]
    assert cols == {"prompt": "instruction", "response": "output", "system": "system", "history": "history"}


def test_summary_report_lines(tmp_path):
    src = write(tmp_path / "in.jsonl", *([MESSAGES] * 9), b"oops")
    summary = run(src, tmp_path / "data")
    text = "\n".join(prepare.report(summary))
    assert "10 rows read, 9 kept, 1 rejected (messages)" in text
    assert "invalid_json" in text and "first at line 10" in text
    assert "turns per row:      p50 2" in text and "characters per row" in text
    assert "registered `ds`" in text and 'SET="dataset=ds"' in text
