"""The base a recipe inherits and the block on top of it: what differs is carried, what the base would add to
what is trained is `null` (LLaMA-Factory's default, as the user's file had), run settings come from the base."""

from __future__ import annotations

import dataclasses

import pytest

from rocmft.importer import base


def test_the_defaults_table_is_llamafactorys():
    """LF_DEFAULTS decides which base values need no line: it must be what the installed LLaMA-Factory (and
    transformers) default to. (A base key it lacks is written as `null`: right, only one line longer.)"""
    from llamafactory.hparams import parser

    fields = {}
    for dc in parser._TRAIN_ARGS:
        for f in dataclasses.fields(dc):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            fields.setdefault(f.name, getattr(default, "value", default))
    for key, value in base.LF_DEFAULTS.items():
        assert base.same(value, fields[key]) or value == fields[key], (key, value, fields[key])


@pytest.mark.parametrize("args, expected", [
    ({"finetuning_type": "lora", "dataset": "d"}, "_base/lora.yaml"),
    ({"dataset": "d"}, "_base/lora.yaml"),  # LLaMA-Factory's default method is LoRA
    ({"finetuning_type": "full", "dataset": "d", "learning_rate": 1e-5}, "_base/full.yaml"),
])
def test_the_base_made_for_the_method(args, expected, project):
    assert base.choose(args).base == expected


def test_a_method_no_base_is_made_for_takes_the_shared_one(project):
    chosen = base.choose({"finetuning_type": "freeze", "dataset": "d"})
    assert chosen.base == "_base/sft.yaml" and chosen.carried["finetuning_type"] == "freeze"


def test_a_new_base_on_disk_is_a_candidate(project):
    (project / "recipes" / "_base" / "pt.yaml").write_text(
        "base: sft.yaml\nllamafactory:\n  stage: pt\n  finetuning_type: lora\n  lora_target: all\n")
    assert base.choose({"stage": "pt", "dataset": "c4", "finetuning_type": "lora"}).base == "_base/pt.yaml"


def test_carried_nulled_and_inherited():
    base_lf = {"stage": "sft", "do_train": True, "cutoff_len": 2048, "learning_rate": 1e-4, "lora_rank": 16,
               "logging_steps": 10, "save_total_limit": 3, "num_train_epochs": 3.0}
    carried, inherited = base.layer(base_lf, {"dataset": "d", "cutoff_len": 1024, "num_train_epochs": 3})
    # differs or new: carried in the file's order; what the base would change in training: null; equal to
    # LLaMA-Factory's own default (stage sft, cutoff 2048): nothing to say
    assert carried == {"dataset": "d", "cutoff_len": 1024, "learning_rate": None, "lora_rank": None}
    assert inherited == {"do_train": True, "logging_steps": 10, "save_total_limit": 3}


def test_same_reads_values_as_llamafactory_does():
    assert base.same(3, 3.0) and base.same("all", "all") and base.same(None, None)
    assert not base.same(True, 1) and not base.same("1", 1) and not base.same(0, False)
