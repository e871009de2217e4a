"""A chat template that does not fit the model is named with the one that does (issue 42): LLaMA-Factory's
model table for a chat model it lists (refused), the model's own tokenizer for a model folder (a warning)."""

from __future__ import annotations

import json
import shutil

import pytest

from rocmft.validate import template

pytest.importorskip("llamafactory")
CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}")


def lines(model: str, name: str) -> list[str]:
    return [p.line() for p in template.check({"model_name_or_path": model, "template": name}, "r.yaml -> train.yaml")]


def test_a_chat_model_in_llamafactory_s_table_gets_its_own_template():
    assert lines("Qwen/Qwen3-8B", "llama3") == [
        ("error: r.yaml -> train.yaml: template: `llama3` is not the chat format of Qwen/Qwen3-8B: LLaMA-Factory's "
         'model table gives `qwen3` (extras/constants.py) (template: qwen3, or SET="template=qwen3")')]
    assert lines("meta-llama/Meta-Llama-3-8B-Instruct", "qwen")[0].startswith(
        "error: r.yaml -> train.yaml: template: `qwen` is not the chat format of meta-llama/Meta-Llama-3-8B-Instruct")
    # the same turn is the same format: qwen and qwen3_nothink write Qwen3's user turn
    assert lines("Qwen/Qwen3-8B", "qwen") == lines("Qwen/Qwen3-8B", "qwen3_nothink") == []
    for model, name in (("meta-llama/Meta-Llama-3-8B-Instruct", "llama3"), ("Qwen/Qwen2.5-7B-Instruct", "qwen"),
                        ("meta-llama/Meta-Llama-3-8B", "default")):  # a base model: LLaMA-Factory names none
        assert lines(model, name) == [], (model, name)


def test_a_model_folder_is_judged_by_its_tokenizer_s_chat_template(tmp_path, tiny_model):
    assert lines(str(tiny_model), "llama3") == []  # no chat template: nothing to judge by
    folder = shutil.copytree(tiny_model, tmp_path / "chatml-model")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHATML}))
    [warning] = lines(str(folder), "llama3")
    assert warning.startswith(f"warning: r.yaml -> train.yaml: template: `llama3` writes a user's turn unlike the "
                              f"chat template of {folder}'s tokenizer; alike: `chatml`, ")
    assert warning.endswith('(fine for a base model taught a format of your choice; else SET="template=chatml")')
    assert lines(str(folder), "qwen") == []
