"""Preference pairs, KTO rows and plain text in `make data`: detected, each bad row named with its line and
reason, a KTO set of one label refused, and each registered the way LLaMA-Factory reads its kind."""

from __future__ import annotations

import copy
import json

import pytest

from rocmft.data import formats, prepare
from rocmft.io.problems import ProblemReport

from .helpers import digest, line, registry, rejects, run, write

PAIR_ALPACA = {"instruction": "2 + 2?", "input": "", "chosen": "4.", "rejected": "5."}
PAIR_SHAREGPT = {"conversations": [{"from": "human", "value": "Hi"}],
                 "chosen": {"from": "gpt", "value": "Hello!"}, "rejected": {"from": "gpt", "value": "Go away."}}
PAIR_MESSAGES = {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}],
                 "chosen": {"role": "assistant", "content": "Hello!"}, "rejected": {"role": "assistant", "content": "No."}}
KTO_MESSAGES = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], "label": True}
KTO_ALPACA = {"instruction": "2 + 2?", "output": "4.", "label": False}
KTO_SHAREGPT = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Go away."}], "label": False}
TEXT = {"text": "ROCm is AMD's open software stack for GPU computing."}
GOOD = {"alpaca-preference": PAIR_ALPACA, "sharegpt-preference": PAIR_SHAREGPT, "messages-preference": PAIR_MESSAGES,
        "alpaca-kto": KTO_ALPACA, "sharegpt-kto": KTO_SHAREGPT, "messages-kto": KTO_MESSAGES, "text": TEXT}


def _with(row: dict, **changes) -> dict:
    out = copy.deepcopy(row)
    for key, value in changes.items():
        if value is ...:
            out.pop(key)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("fmt", list(GOOD))
def test_each_kind_is_detected_and_its_good_rows_pass(fmt):
    row = GOOD[fmt]
    assert formats.detect(row) == fmt
    turns, chars = formats.CHECKS[fmt](row, formats.Columns(), 1, set())
    assert turns >= 1 and chars > 0


def test_a_label_meant_as_a_boolean_makes_a_kto_row_any_other_is_an_ordinary_column():
    assert formats.detect({"instruction": "a", "output": "b", "label": "math"}) == "alpaca"
    assert formats.detect({"messages": [], "label": 7}) == "messages"
    for meant in (True, "false", " True", 0, 1):
        assert formats.detect({"messages": [], "label": meant}) == "messages-kto", meant


def test_a_set_of_string_labels_is_a_kto_set_whose_rows_say_why(tmp_path):
    src = write(tmp_path / "in.jsonl", *(_with(KTO_MESSAGES, label=v) for v in ("true", "false", "true")))
    with pytest.raises(ProblemReport, match="no valid rows"):
        run(src, tmp_path / "data")
    assert {r["reason"] for r in rejects(tmp_path / "data")} == {"label_not_boolean"}


# (what, format, row, reason): every reason the new kinds add, and the old ones as they apply to them.
BAD_KINDS = [
    ("pair without rejected", "alpaca-preference", _with(PAIR_ALPACA, rejected=...), "missing_field"),
    ("pair with null chosen", "alpaca-preference", _with(PAIR_ALPACA, chosen=None), "missing_field"),
    ("pair with a number chosen", "alpaca-preference", _with(PAIR_ALPACA, chosen=4), "wrong_type"),
    ("pair with empty rejected", "alpaca-preference", _with(PAIR_ALPACA, rejected="  "), "empty_content"),
    ("pair of equal answers", "alpaca-preference", _with(PAIR_ALPACA, rejected="4. "), "chosen_equals_rejected"),
    ("pair without a prompt", "alpaca-preference", _with(PAIR_ALPACA, instruction=""), "empty_content"),
    ("chat pair without chosen", "messages-preference", _with(PAIR_MESSAGES, chosen=...), "missing_field"),
    ("chat pair with a string answer", "messages-preference", _with(PAIR_MESSAGES, chosen="Hello!"), "wrong_type"),
    ("chat pair answered by the user", "messages-preference",
     _with(PAIR_MESSAGES, rejected={"role": "user", "content": "No."}), "bad_turn_order"),
    ("chat pair with an unknown role", "messages-preference",
     _with(PAIR_MESSAGES, chosen={"role": "bot", "content": "x"}), "unknown_role"),
    ("chat pair with an empty answer", "messages-preference",
     _with(PAIR_MESSAGES, chosen={"role": "assistant", "content": ""}), "empty_content"),
    ("chat pair answer without content", "messages-preference",
     _with(PAIR_MESSAGES, chosen={"role": "assistant"}), "missing_field"),
    ("chat pair of equal answers", "messages-preference",
     _with(PAIR_MESSAGES, rejected={"role": "assistant", "content": "Hello!"}), "chosen_equals_rejected"),
    ("prompt ending on the assistant", "messages-preference",
     _with(PAIR_MESSAGES, messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]),
     "last_turn_not_user"),
    ("sharegpt prompt ending on gpt", "sharegpt-preference",
     _with(PAIR_SHAREGPT, conversations=[{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]),
     "last_turn_not_user"),
    ("sharegpt answer from the human", "sharegpt-preference",
     _with(PAIR_SHAREGPT, chosen={"from": "human", "value": "x"}), "bad_turn_order"),
    ("an SFT row in a pair file", "alpaca-preference", {"instruction": "a", "output": "b"}, "mixed_format"),
    ("KTO label as a string", "messages-kto", _with(KTO_MESSAGES, label="true"), "label_not_boolean"),
    ("KTO label as a number", "messages-kto", _with(KTO_MESSAGES, label=1), "label_not_boolean"),
    ("KTO row without a label", "messages-kto", _with(KTO_MESSAGES, label=...), "missing_field"),
    ("KTO row with a null label", "messages-kto", _with(KTO_MESSAGES, label=None), "missing_field"),
    ("KTO row ending on the user", "messages-kto",
     _with(KTO_MESSAGES, messages=[{"role": "user", "content": "Hi"}]), "last_turn_not_assistant"),
    ("alpaca KTO label as a string", "alpaca-kto", _with(KTO_ALPACA, label="no"), "label_not_boolean"),
    ("empty text", "text", {"text": ""}, "empty_content"),
    ("text as a number", "text", {"text": 5}, "wrong_type"),
    ("text with NUL", "text", {"text": "a\u0000b"}, "nul_byte"),
    ("a pair in a text file", "text", PAIR_ALPACA, "mixed_format"),
]


@pytest.mark.parametrize("what,fmt,bad,reason", BAD_KINDS, ids=[c[0] for c in BAD_KINDS])
def test_each_bad_row_of_the_new_kinds_named_with_line_and_reason(tmp_path, what, fmt, bad, reason):
    other = _with(GOOD[fmt], label=not GOOD[fmt]["label"]) if "label" in GOOD[fmt] else GOOD[fmt]
    src = write(tmp_path / "in.jsonl", GOOD[fmt], bad, other)
    summary = run(src, tmp_path / "data")  # FORMAT=auto: the first row sets it
    assert summary.fmt == fmt and summary.rejected == {reason: 1}, (what, rejects(tmp_path / "data"))
    rej = rejects(tmp_path / "data")[0]
    assert rej["line"] == 2 and rej["reason"] == reason and rej["detail"] and rej["offset"] == len(line(GOOD[fmt]))


def test_a_pair_row_in_a_supervised_file_is_another_format(tmp_path):
    src = write(tmp_path / "in.jsonl", {"instruction": "a", "output": "b"}, PAIR_ALPACA, {"instruction": "c", "output": "d"})
    summary = run(src, tmp_path / "data")
    assert summary.fmt == "alpaca" and summary.rejected == {"mixed_format": 1}
    assert "alpaca-preference" in rejects(tmp_path / "data")[0]["detail"]


def test_a_kto_set_of_one_label_is_refused_and_nothing_registered(tmp_path):
    src = write(tmp_path / "in.jsonl", KTO_MESSAGES, _with(KTO_MESSAGES, label="yes"), KTO_MESSAGES)
    before = digest(src)
    with pytest.raises(ProblemReport) as info:
        run(src, tmp_path / "data")
    assert "every kept row has `label: true`" in str(info.value) and str(info.value).count("\n") == 0
    assert not (tmp_path / "data" / "ds.jsonl").exists() and not (tmp_path / "data" / "dataset_info.json").exists()
    assert rejects(tmp_path / "data")[0]["reason"] == "label_not_boolean"  # the row's own reason is still kept
    assert digest(src) == before
    checked = run(src, tmp_path / "data", check_only=True)
    assert checked.set_problem and any(x.startswith("error: every kept row") for x in prepare.report(checked))
    from rocmft.cli import main as cli

    assert cli.main(["data", str(src), "--check", "--no-progress"]) == 2  # make data-check fails on it too


def test_kto_labels_are_counted_in_the_report(tmp_path):
    src = write(tmp_path / "in.jsonl", KTO_MESSAGES, _with(KTO_MESSAGES, label=False), KTO_MESSAGES)
    summary = run(src, tmp_path / "data")
    assert summary.labels == {True: 2, False: 1}
    report = "\n".join(prepare.report(summary))
    assert "labels:             2 desirable (true), 1 undesirable (false)" in report
    assert "set kto_chosen_weight between 0.50 and 0.67" in report  # TRL's [1, 4/3] rule for 2:1


def test_a_text_file_becomes_jsonl_documents_blank_lines_skipped_bad_lines_named(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_bytes(b"\xef\xbb\xbfFirst document.\n\nSecond \xff document.\nThird has a \x00 NUL.\n   \nFourth one.")
    before = digest(src)
    summary = run(src, tmp_path / "data", name="notes")
    assert summary.fmt == "text" and (summary.kept, summary.blank_lines) == (2, 2)
    assert summary.rejected == {"invalid_utf8": 1, "nul_byte": 1}
    assert [r["line"] for r in rejects(tmp_path / "data", "notes")] == [3, 4]
    rows = [json.loads(x) for x in (tmp_path / "data" / "notes.jsonl").read_text().splitlines()]
    assert rows == [{"text": "First document."}, {"text": "Fourth one."}]
    assert registry(tmp_path / "data")["notes"] == {"file_name": "notes.jsonl", "columns": {"prompt": "text"}}
    assert digest(src) == before


def test_a_text_file_refuses_convert_and_another_format(tmp_path):
    src = write(tmp_path / "in.txt", b"[not json, just text]\n")
    with pytest.raises(ProblemReport) as info:
        run(src, tmp_path / "data", convert=True, fmt="alpaca")
    text = str(info.value)
    assert "CONVERT: a .txt file is plain text" in text and "FORMAT: a .txt file is plain text" in text
    assert run(src, tmp_path / "data").kept == 1  # a line starting with `[` is text here, not a JSON array


@pytest.mark.parametrize("fmt,rows", [
    ("alpaca-preference", [PAIR_ALPACA, {**PAIR_ALPACA, "system": "s", "history": [["q", "r"]]}]),
    ("sharegpt-preference", [PAIR_SHAREGPT, {**PAIR_SHAREGPT, "system": "s"}]),
    ("messages-preference", [PAIR_MESSAGES]),
    ("alpaca-kto", [KTO_ALPACA, _with(KTO_ALPACA, label=True, input="ctx")]),
    ("sharegpt-kto", [KTO_SHAREGPT, _with(KTO_SHAREGPT, label=True)]),
    ("messages-kto", [KTO_MESSAGES, _with(KTO_MESSAGES, label=False)]),
    ("text", [TEXT, {"text": "another document", "source": "wiki"}]),
])
def test_registered_entries_are_read_by_llamafactory_as_their_kind(tmp_path, fmt, rows):
    """LLaMA-Factory's own parser and converters read what we register: pairs as two answers, KTO rows as
    one answer with an empty twin on the side of its label, text as a prompt without an answer."""
    from llamafactory.data.converter import get_dataset_converter
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.hparams import DataArguments

    data = tmp_path / "data"
    summary = run(write(tmp_path / "in.jsonl", *rows), data, name="t")
    assert summary.fmt == fmt and summary.kept == len(rows)
    attr = get_dataset_list(["t"], str(data))[0]
    converter = get_dataset_converter(attr.formatting, attr, DataArguments(dataset_dir=str(data)))
    kind = formats.kind(fmt)
    assert formats.entry_kind(registry(data)["t"]) == kind
    for row in rows:
        out = converter({k: None for r in rows for k in r} | row)  # the loader fills absent columns with None
        response = out["_response"]
        if kind == "text":
            assert out["_prompt"][0]["content"] == row["text"] and response == []
            continue
        assert out["_prompt"] and out["_prompt"][-1]["role"] == "user", out
        if kind == "preference":
            assert [r["role"] for r in response] == ["assistant", "assistant"] and response[0]["content"] != response[1]["content"]
        else:  # KTO: [answer, ""] for a desirable row, ["", answer] for an undesirable one
            empty = 1 if row["label"] else 0
            assert len(response) == 2 and response[empty]["content"] == "" and response[1 - empty]["content"]


# LLaMA-Factory's own demo entries (its data/dataset_info.json), as a user's registry would hold them.
LF_ENTRIES = {
    "alpaca_en_demo": ({"file_name": "alpaca_en_demo.json"}, "sft"),
    "dpo_en_demo": ({"file_name": "dpo_en_demo.json", "formatting": "sharegpt", "ranking": True,
                     "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}, "preference"),
    "kto_en_demo": ({"file_name": "kto_en_demo.json", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "kto_tag": "label"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}, "kto"),
    "c4_demo": ({"file_name": "c4_demo.jsonl", "columns": {"prompt": "text"}}, "text"),
    "glaive_toolcall_en_demo": ({"file_name": "x.json", "formatting": "sharegpt",
                                 "columns": {"messages": "conversations", "tools": "tools"}}, "sft"),
}


@pytest.mark.parametrize("name", list(LF_ENTRIES))
def test_the_kind_of_any_registry_entry(name):
    entry, kind = LF_ENTRIES[name]
    assert formats.entry_kind(entry) == kind
