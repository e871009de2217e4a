"""A recipe from elsewhere cannot crash or flood rocmft: 20,000 nested brackets and an alias bomb are each one
line and exit 2 (the brackets were a RecursionError traceback; the bomb expands to 10^9 values in every copy
of the recipe, the validation request sent to a container included)."""

from __future__ import annotations

import time

import pytest

from rocmft.cli.main import main

CASES = {
    "deep brackets": ("llamafactory:\n  x: " + "[" * 20000 + "]" * 20000 + "\n", "nested more than 64 levels deep"),
    "deep mappings": ("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n",
                      "nested more than 64 levels deep"),
    "alias bomb": ("base: _base/lora.yaml\narch: cpu\nplan:\n  l0: &l0 [x]\n" +
                   "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)) +
                   "llamafactory:\n  dataset: demo_alpaca\n", "aliases expand to more than 100,000 values"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_in_one_line_exit_2(case, tmp_path, capsys):
    text, expected = CASES[case]
    recipe = tmp_path / "attack.yaml"
    recipe.write_text(text)
    started = time.monotonic()
    assert main(["render", str(recipe)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {recipe}: YAML syntax error at line") and expected in line, line
    assert time.monotonic() - started < 60  # bounds a hang (an expanded bomb would never end), no speed claim


def test_anchors_and_aliases_a_person_writes_still_work(tmp_path):
    from rocmft.io.yamlio import parse_yaml

    assert parse_yaml("lr: &lr 5e-5\nsched: {lr: *lr}\n") == {"lr": 5e-5, "sched": {"lr": 5e-5}}



# L7 again (issue 43): an alias inside its own anchor (`x: &a [*a]`, 10 bytes) composes into a node that holds
# itself; counting its values recursed until a RecursionError traceback, in a recipe, in SET= and in make import.
@pytest.mark.parametrize("value", ["&a [*a]", "&a {k: [1, *a]}"], ids=["self", "nested"])
def test_a_recursive_alias_is_one_line_in_a_recipe_in_set_and_in_make_import(value, tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "attack.yaml"
    recipe.write_text(f"base: tiny-cpu\nplan:\n  x: {value}\n")
    imported = tmp_path / "train.yaml"
    imported.write_text(f"x: {value}\nmodel_name_or_path: models/tiny-llama\ndo_train: true\ndataset: demo_alpaca\n")
    monkeypatch.chdir(tmp_path)
    runs = {"recipe": ["render", str(recipe), "--no-validate"],
            "SET=": ["render", "tiny-cpu", "--no-validate", "--set", f"plan.x={value}"],
            "make import": ["import", str(imported), "x"]}
    for what, argv in runs.items():
        assert main(argv) == 2, what
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "an alias inside its own anchor" in lines[0], (what, lines)
