"""`make copy` creates its file in the user's workspace (my/recipes/): a dangling link planted at the new name, there
or among the shipped recipes, is refused, not written through; the copy's header names it and its origin."""

from __future__ import annotations

import pytest

from rocmft.cli.copy import retitled
from rocmft.cli.main import main
from rocmft.recipe import recipes
from tests.conftest import ROOT
from tests.unit.importer.conftest import make_project


@pytest.mark.parametrize("planted_in", ["recipes", "my/recipes"])
def test_copy_refuses_a_dangling_link_at_the_new_name(tmp_path, monkeypatch, capsys, planted_in):
    project = make_project(tmp_path / "project")
    monkeypatch.setenv("ROCMFT_ROOT", str(project))
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    (project / planted_in).mkdir(parents=True, exist_ok=True)
    (project / planted_in / "mine.yaml").symlink_to(victim)
    assert main(["copy", str(ROOT / "recipes" / "tiny-cpu.yaml"), "mine"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"TO: {planted_in}/mine.yaml exists: not overwritten" in line
    assert not victim.exists()
    assert main(["copy", str(ROOT / "recipes" / "tiny-cpu.yaml"), "fresh"]) == 0
    assert "-> my/recipes/fresh.yaml" in capsys.readouterr().out
    assert not (project / "recipes" / "fresh.yaml").exists()


def test_the_copy_says_what_it_is_and_is_found_by_name(tmp_path, monkeypatch, capsys):
    project = make_project(tmp_path / "project")
    (project / "recipes" / "tiny-cpu.yaml").symlink_to(ROOT / "recipes" / "tiny-cpu.yaml")
    monkeypatch.setenv("ROCMFT_ROOT", str(project))
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    assert main(["copy", "tiny-cpu", "my-tiny"]) == 0
    text = (project / "my" / "recipes" / "my-tiny.yaml").read_text()
    original = (ROOT / "recipes" / "tiny-cpu.yaml").read_text()
    assert text.splitlines()[0] == "# my-tiny: copied from tiny-cpu: " + original.splitlines()[0].lstrip("# ")
    assert "make train RECIPE=my-tiny RUNTIME=local" in text and "RECIPE=tiny-cpu" not in text
    assert text.splitlines()[3:] == original.splitlines()[3:]  # below the header: the original, as it was
    assert recipes.find("my-tiny") == project / "my" / "recipes" / "my-tiny.yaml"
    assert recipes.load("my-tiny").description.startswith("my-tiny: copied from tiny-cpu")
    assert main(["list"]) == 0
    assert "(yours) my-tiny: copied from tiny-cpu" in capsys.readouterr().out
    assert main(["copy", "tiny-cpu", "tiny-cpu"]) == 2  # a shipped name is taken: never shadowed


def test_retitled_keeps_other_recipes_names():
    text = "# A thing.\n#   make train RECIPE=tiny-cpu-dpo\n#   make train RECIPE=tiny-cpu\nbase: x\n"
    out = retitled(text, "tiny-cpu", "mine")
    assert out == "# mine: copied from tiny-cpu: A thing.\n#   make train RECIPE=tiny-cpu-dpo\n#   make train RECIPE=mine\nbase: x\n"
    assert retitled("base: x\n", "a", "b") == "# b: copied from a\nbase: x\n"
