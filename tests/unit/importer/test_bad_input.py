"""Input that cannot become a recipe: one line naming what and where, exit 2, and nothing written - not in
my/recipes/ (the workspace), not to the user's files."""

from __future__ import annotations

import pytest

from rocmft.cli.main import main

TRAIN = ("model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ndo_train: true\n"
         "dataset: demo_alpaca\ntemplate: llama3\nfinetuning_type: lora\noutput_dir: saves/x\nbf16: true\n")
FILES = {
    "train.yaml": TRAIN,
    "broken.yaml": "model_name_or_path: [x\n",
    "scalar.yaml": "just a sentence\n",
    "empty.yaml": "",
    "recipe.yaml": "base: _base/lora.yaml\narch: cpu\nllamafactory:\n  dataset: demo_alpaca\n",
    "chat.yaml": "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\ntemplate: llama3\ninfer_backend: huggingface\n",
    "export.yaml": "model_name_or_path: x\nadapter_name_or_path: saves/x\ntemplate: llama3\nexport_dir: out\n",
    "predict.yaml": "model_name_or_path: x\ndo_predict: true\neval_dataset: demo_alpaca\ntemplate: llama3\n",
    "names-missing-ds.yaml": TRAIN + "deepspeed: nowhere/ds.json\n",
    "ds-broken.json": '{"zero_optimization": {"stage": 3,}',
    "ds-list.json": "[1, 2]",
}
CASES = {
    "not YAML": (["broken.yaml", "x"], "broken.yaml: YAML syntax error at line 2"),
    "not a mapping": (["scalar.yaml", "x"], "scalar.yaml: expected a mapping of keys"),
    "empty": (["empty.yaml", "x"], "empty.yaml: empty: no LLaMA-Factory arguments"),
    "binary": (["blob.yaml", "x"], "blob.yaml: not a text file"),
    "a recipe already": (["recipe.yaml", "x"], "recipe.yaml: already a rocmft recipe (start from it with `make copy"),
    "an inference config": (["chat.yaml", "x"], "an inference (chat/api) config, not a train config"),
    "an export config": (["export.yaml", "x"], "export.yaml: an export config (export_dir)"),
    "a prediction config": (["predict.yaml", "x"], "an evaluation/prediction config"),
    "no such file": (["nope.yaml", "x"], "nope.yaml: file not found"),
    "no FILE": ([], "FILE: missing: the LLaMA-Factory train YAML"),
    "TO exists": (["train.yaml", "taken"], "TO: recipes/taken.yaml exists: not overwritten"),
    "TO escapes recipes/": (["train.yaml", "../evil"], "TO: `../evil` is not a recipe name"),
    "TO in a folder": (["train.yaml", "sub/x"], "TO: `sub/x` is not a recipe name"),
    "no TO": (["train.yaml"], "TO: `` is not a recipe name"),
    "DS not JSON": (["train.yaml", "x", "--ds", "ds-broken.json"], "ds-broken.json: not valid JSON at line 1"),
    "DS not an object": (["train.yaml", "x", "--ds", "ds-list.json"], "ds-list.json: a DeepSpeed config must be a JSON object"),
    "DS missing": (["train.yaml", "x", "--ds", "gone.json"], "gone.json: file not found"),
    "the YAML's JSON missing": (["names-missing-ds.yaml", "x"], "deepspeed: `nowhere/ds.json` not found"),
    "CMD not a shell line": (["train.yaml", "x", "--cmd", "torchrun 'unclosed"], "CMD: not a shell line"),
    "unknown arch": (["train.yaml", "x", "--arch", "gfx9999"], "ARCH: unknown arch `gfx9999`"),
    "no arch anywhere": (["train.yaml", "x"], "ARCH: which GPU will train it?"),
    "GPUS_PER_NODE not a number": (["train.yaml", "x", "--arch", "gfx942", "--gpus-per-node", "eight"],
                                   "GPUS_PER_NODE: must be a whole number >= 1, got `eight`"),
    "more GPUs than a node": (["train.yaml", "x", "--arch", "gfx942", "--cmd", "NPROC_PER_NODE=16 lmf train train.yaml"],
                              "16 GPUs per node, but a gfx942 node holds at most 8"),
}


@pytest.fixture
def user_files(tmp_path, project, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    (folder / "blob.yaml").write_bytes(b"\xff\xfe\x00binary\x00")
    (project / "recipes" / "taken.yaml").write_text("# someone's recipe\n")
    monkeypatch.chdir(folder)
    return folder


def snapshot(*folders):
    return {p: p.read_bytes() for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_in_one_line_exit_2_nothing_written(case, user_files, project, capsys):
    argv, expected = CASES[case]
    before = snapshot(user_files, project / "recipes", project / "my")
    code = main(["import", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: ") and expected in err[0], err
    assert snapshot(user_files, project / "recipes", project / "my") == before


def test_a_file_whose_recipe_would_not_validate_is_not_written(user_files, project, capsys):
    """Mistakes import cannot decide for the user (a misspelt choice) stop it: every one said, nothing kept."""
    (user_files / "typo.yaml").write_text(TRAIN.replace("lora", "lorra") + "flash_attn: off\n")
    before = snapshot(project / "recipes", project / "my")
    code = main(["import", "typo.yaml", "typo", "--arch", "gfx942"])
    err = capsys.readouterr().err
    assert code == 2
    assert "finetuning_type: `lorra` is not a valid choice (did you mean `lora`?)" in err
    assert "flash_attn: YAML read this value as false" in err
    assert "error: TO: typo.yaml not written: the recipe would not validate" in err
    assert snapshot(project / "recipes", project / "my") == before


def test_without_the_training_stack_it_imports_and_says_the_checks_did_not_run(user_files, project, monkeypatch, capsys):
    """A light host with no image for the arch: the recipe is written from the translations alone, and the report
    says LLaMA-Factory's and DeepSpeed's checks did not run (as `rocmft validate` does there)."""
    from rocmft.validate import where

    monkeypatch.setattr(where, "auto", lambda arch: where.nowhere("this host has no training stack (test)"))
    code = main(["import", "train.yaml", "light", "--arch", "gfx942"])
    out = capsys.readouterr().out
    assert code == 0 and (project / "my" / "recipes" / "light.yaml").is_file()
    assert out.count("warning: LLaMA-Factory's and DeepSpeed's checks did not run: this host has no training stack") == 2
