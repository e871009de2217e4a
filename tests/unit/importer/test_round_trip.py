"""Every shipped recipe survives the trip: render it, import the rendered train.yaml + ds_config.json back
with the same arch and layout, and the new recipe renders the same bytes. The cases are the recipes on disk,
so a recipe or preset added tomorrow is covered by this test as it is."""

from __future__ import annotations

import re

import pytest

from rocmft import importer
from rocmft.recipe import recipes, render
from tests.conftest import ROOT

SHIPPED = sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml"))
RUN = "runs/round-trip"


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_recipe_renders_the_same_after_import(name, project, tmp_path):
    original = recipes.load(str(ROOT / "recipes" / f"{name}.yaml"))
    first = render.render(original, RUN)
    folder = tmp_path / "rendered"
    folder.mkdir()
    (folder / "train.yaml").write_text(first.train_yaml)
    ds = None
    if first.ds_config is not None:
        ds = folder / "ds_config.json"
        ds.write_text(first.ds_config)
    report = importer.run(importer.Request(
        file=str(folder / "train.yaml"), to=name, ds=str(ds) if ds else None, arch=original.arch,
        cmd=f"FORCE_TORCHRUN=1 NNODES={original.nodes} NPROC_PER_NODE={original.gpus_per_node} "
            f"llamafactory-cli train {folder / 'train.yaml'}"))
    imported = recipes.load(name)
    again = render.render(imported, RUN)
    assert again.train_yaml == first.train_yaml, report.text()
    assert again.ds_config == first.ds_config, report.text()
    # the layout and what it runs on came along; the preset is a shipped one, never a copy of its own output
    assert (imported.arch, imported.gpus_per_node, imported.nodes) == (original.arch, original.gpus_per_node, original.nodes)
    assert imported.deepspeed == original.deepspeed and not imported.deepspeed_file
    assert imported.precision == original.precision
    # nothing to say beyond what rocmft itself owns: no nulls, no inherited values, the preset exactly
    assert report.lines["defaults"] == [] and report.lines["inherited"] == [], report.text()
    assert {re.match(r"\w+", line).group() for line in report.lines["dropped"]} <= {"output_dir", "flash_attn", "FORCE_TORCHRUN"}
    assert report.lines["deepspeed"] == ([f"ds_config.json renders as preset {original.deepspeed} does"] if ds else [])
