"""`--base-too` (make demo's base-vs-trained lines), as data: the argv chat hands to ask.py, the adapters ask.py
takes out of LLaMA-Factory's arguments to merge after the base answer, and the two lines chat prints. The
real answers (LLaMA-Factory's ChatModel, peft's merge) are checked by tests/train/test_demo_cpu.py."""

from __future__ import annotations

import json

from rocmft.cli import chat as chat_cli
from rocmft.run import target
from rocmft.serve import ask, plan
from tests.unit.run.conftest import make_run


def test_base_too_is_asked_of_ask_py_before_its_llamafactory_arguments(runs_dir):
    t = target.load(make_run(runs_dir, "r1"))
    argv = plan.chat(t, {}, "local", prompt_file="q", base_too=True).argv
    assert argv[:6] == ("python", "-m", "rocmft.serve.ask", "--prompt-file=q", "--base-too", "--")
    assert "--base-too" not in plan.chat(t, {}, "local", prompt_file="q").argv


def test_the_adapters_are_taken_out_of_the_load_in_both_spellings():
    rest, adapters = ask._without_adapters(["--model_name_or_path", "m", "--adapter_name_or_path", "a, b",
                                            "--template", "llama3", "--adapter_name_or_path=c"])
    assert rest == ["--model_name_or_path", "m", "--template", "llama3"] and adapters == ["a", "b", "c"]


def test_the_two_answers_are_one_line_each_and_a_garbled_reply_fails(capsys):
    base = "random\n tokens " + "x" * 200
    assert chat_cli._side_by_side(0, json.dumps({"base": base, "tuned": "I am it."}) + "\n", [], "Who?") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[rocmft] asked: Who?" and out[2] == "  trained    : I am it."
    assert out[1].startswith("  base model : random tokens x") and len(out[1]) <= len("  base model : ") + 72
    assert chat_cli._side_by_side(0, "not json\n", ["a log line"], "Who?") == 1
    assert "chat FAILED" in capsys.readouterr().err
