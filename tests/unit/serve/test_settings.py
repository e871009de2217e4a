"""Generation settings: defaults, SET= typed like YAML, every bad item one line, and the key table pinned
against LLaMA-Factory 0.9.5's own inference dataclasses (a key it does not take would fail at start)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.serve import settings


def test_defaults_and_overrides():
    assert settings.parse("") == {"max_new_tokens": 512, "temperature": 0.7, "top_p": 0.9}
    got = settings.parse("max_new_tokens=64 temperature=0 do_sample=false 'default_system=You are terse.' top_p=")
    assert got == {"max_new_tokens": 64, "temperature": 0.0, "do_sample": False, "default_system": "You are terse."}


def test_every_bad_setting_reported_at_once_one_line_each():
    with pytest.raises(ProblemReport) as exc:
        settings.parse("x max_new_token=5 temperature=hot template=qwen top_p=2 infer_backend=pt max_new_tokens=0")
    lines = str(exc.value).splitlines()
    assert lines == [
        'error: SET: x: a setting must be key=value, e.g. SET="max_new_tokens=128"',
        "error: SET: max_new_token: not a generation setting LLaMA-Factory takes at inference (did you mean `max_new_tokens`?)",
        "error: SET: temperature: `hot` is not a number",
        "error: SET: template: taken from the run (its train.yaml), not settable here (pick another RUN= (or `make export` for a merged model))",
        "error: SET: top_p: must be in (0, 1], got 2.0",
        "error: SET: infer_backend: `pt` is not one of: huggingface, vllm, sglang",
        "error: SET: max_new_tokens: must be at least 1, got 0",
    ]
    # a stray word after a value belongs to that value (an apostrophe or a space is text): reported there
    with pytest.raises(ProblemReport) as exc:
        settings.parse("max_new_tokens=5 x")
    assert str(exc.value) == "error: SET: max_new_tokens: `5 x` is not a whole number"


def _base(tp):
    """`int | None` -> int, Literal[...] -> str, an enum -> str."""
    import enum

    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Literal:
        return str, tuple(args)
    if args and typing.get_origin(tp) in (typing.Union, __import__("types").UnionType):
        return _base(args[0])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return str, tuple(m.value for m in tp)
    return tp, ()


def test_the_key_table_is_what_llamafactory_parses_at_inference():
    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        GeneratingArguments,
        ModelArguments,
    )

    fields = {}
    for cls in (GeneratingArguments, ModelArguments, DataArguments, FinetuningArguments):
        hints = typing.get_type_hints(cls)
        fields.update({f.name: hints[f.name] for f in dataclasses.fields(cls)})
    for f in dataclasses.fields(GeneratingArguments):
        assert f.name in settings.KEYS, f"LLaMA-Factory generation key {f.name} missing from settings.KEYS"
    for key, (kind, choices) in settings.KEYS.items():
        assert key in fields, f"{key}: LLaMA-Factory 0.9.5 has no such inference argument"
        lf_kind, lf_choices = _base(fields[key])
        assert lf_kind is kind, (key, fields[key])
        assert set(choices) == set(lf_choices), (key, lf_choices)
    for key in settings.FROM_RUN:
        assert key in fields


def test_an_apostrophe_in_a_setting_is_text():
    got = settings.parse("default_system=You're terse, aren't you? temperature=0")
    assert got["default_system"] == "You're terse, aren't you?" and got["temperature"] == 0.0
