"""`make copy` creates its file: a dangling link planted at recipes/<TO>.yaml is refused, not written through."""

from __future__ import annotations

from rocmft.cli.main import main
from tests.conftest import ROOT
from tests.unit.importer.conftest import make_project


def test_copy_refuses_a_dangling_link_at_the_new_name(tmp_path, monkeypatch, capsys):
    project = make_project(tmp_path / "project")
    monkeypatch.setenv("ROCMFT_ROOT", str(project))
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    (project / "recipes" / "mine.yaml").symlink_to(victim)
    assert main(["copy", str(ROOT / "recipes" / "tiny-cpu.yaml"), "mine"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "TO: recipes/mine.yaml exists: not overwritten" in line
    assert not victim.exists()
    assert main(["copy", str(ROOT / "recipes" / "tiny-cpu.yaml"), "fresh"]) == 0
    assert (project / "recipes" / "fresh.yaml").read_text() == (ROOT / "recipes" / "tiny-cpu.yaml").read_text()
