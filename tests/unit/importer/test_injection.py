"""Values from the user's files written into a recipe's comments, and a recipe's name into a rendered file's
header: a newline in either must not become a line of YAML. Each test performs the injection for real (the
payload adds an `env:` block or `trust_remote_code: true`) and asserts the file read back does not carry it."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from rocmft.cli.main import main
from rocmft.recipe import recipes, render
from rocmft.validate import where

TRAIN = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "stage": "sft", "do_train": True,
         "dataset": "demo_alpaca", "template": "llama3", "finetuning_type": "lora", "output_dir": "saves/x"}
PAYLOAD = "\nenv:\n  LD_PRELOAD: evil.so\n  PYTHONPATH: here\n#"


@pytest.fixture
def light(project, tmp_path, monkeypatch):
    """The checks LLaMA-Factory would run are left out (a light host): the recipe is written from the file alone,
    so nothing but the escaping stands between the payload and the written recipe."""
    monkeypatch.setattr(where, "auto", lambda arch: where.nowhere("no training stack (test)"))
    folder = tmp_path / "mine"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def imported(project, name):
    path = project / "my" / "recipes" / f"{name}.yaml"
    return path.read_text(), yaml.safe_load(path.read_text())


@pytest.mark.parametrize("key, value", [("model_name_or_path", "org/model" + PAYLOAD), ("stage", "sft" + PAYLOAD),
                                        ("finetuning_type", "lora" + PAYLOAD)])
def test_a_newline_in_an_imported_value_stays_in_its_comment(key, value, light, project, capsys):
    (light / "train.yaml").write_text(yaml.safe_dump({**TRAIN, key: value}))
    code = main(["import", "train.yaml", "inj", "--arch", "cpu"])
    out, err = capsys.readouterr()
    if code != 0:  # refused is safe too, if it says so in one line per problem and writes nothing
        assert code == 2 and not (project / "my" / "recipes" / "inj.yaml").exists(), err
        return
    text, data = imported(project, "inj")
    assert "env" not in data, text
    assert "LD_PRELOAD" not in recipes.load(str(project / "my" / "recipes" / "inj.yaml")).env
    assert text.splitlines()[0].startswith("# Imported from train.yaml: ") and "\\nenv:\\n  LD_PRELOAD" in text
    assert "\x1b" not in out


def test_a_newline_in_the_imported_files_own_path(light, project, capsys):
    name = "train" + PAYLOAD.replace("#", "x") + ".yaml"
    (light / name).write_text(yaml.safe_dump(TRAIN))
    assert main(["import", name, "inj", "--arch", "cpu"]) == 0, capsys.readouterr().err
    text, data = imported(project, "inj")
    assert "env" not in data and text.count("\n#") >= 2 and "LD_PRELOAD: evil.so\n" not in text, text


def test_the_report_says_remote_code_and_the_endpoint_it_carries(light, project, capsys):
    (light / "train.yaml").write_text(yaml.safe_dump({**TRAIN, "trust_remote_code": True}))
    cmd = "HF_ENDPOINT=https://hub.example.net llamafactory-cli train train.yaml"
    assert main(["import", "train.yaml", "remote", "--arch", "cpu", "--cmd", cmd]) == 0
    out = capsys.readouterr().out
    assert "trust_remote_code: true carried: training runs Python code from the model's repository as you; " \
           "`make train` runs it only with TRUST_REMOTE_CODE=1" in out
    assert "HF_ENDPOINT=https://hub.example.net carried into env:" in out and "TRUST_RECIPE_ENV=1" in out
    assert "HF_TOKEN is never passed to this recipe's jobs" in out


def test_an_imported_push_to_the_hub_is_said_and_needs_the_opt_in_to_train(light, project, capsys, monkeypatch):
    """N3 (issue 43): `make import` carried push_to_hub and hub_private_repo: false silently; the job then created a
    public repo with the user's token. Now the report says it, and training the written recipe needs PUSH_TO_HUB=1
    (and PRIVATE=0 for the public repo)."""
    from rocmft import pipeline
    from rocmft.io.problems import ProblemReport

    for name in ("PUSH_TO_HUB", "PRIVATE"):
        monkeypatch.delenv(name, raising=False)
    pushing = {"push_to_hub": True, "hub_private_repo": False, "hub_model_id": "someone/leak"}
    (light / "train.yaml").write_text(yaml.safe_dump({**TRAIN, **pushing}))
    assert main(["import", "train.yaml", "pushes", "--arch", "cpu"]) == 0
    out = capsys.readouterr().out
    assert ("hub_model_id, hub_private_repo, push_to_hub carried: training uploads the model to the Hugging Face Hub "
            "with your token; `make train` runs it only with PUSH_TO_HUB=1; hub_private_repo: false makes it public "
            "only with PRIVATE=0") in out, out
    with pytest.raises(ProblemReport) as refused:
        pipeline.prepare(str(project / "my" / "recipes" / "pushes.yaml"), [], validate=False, job=True, env={})
    assert {p.key for p in refused.value.problems} == {f"llamafactory.{k}" for k in pushing}



def test_hub_keys_an_imported_config_leaves_unset_are_not_said_to_upload(light, project, capsys, monkeypatch):
    """A config written out in full (a TrainingArguments dump: `hub_model_id: null`, `hub_token: null`,
    `push_to_hub: false`) uploads nothing: the report says no upload and the recipe trains without PUSH_TO_HUB=1."""
    from rocmft import pipeline

    monkeypatch.delenv("PUSH_TO_HUB", raising=False)
    unset = {"push_to_hub": False, "hub_model_id": None, "hub_token": None, "hub_strategy": None}
    (light / "train.yaml").write_text(yaml.safe_dump({**TRAIN, **unset}))
    assert main(["import", "train.yaml", "quiet", "--arch", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "Hugging Face Hub" not in out and "PUSH_TO_HUB" not in out, out
    prep = pipeline.prepare(str(project / "my" / "recipes" / "quiet.yaml"), [], validate=False, job=True, env={})
    assert not [m for m in prep.messages if m.severity == "error"]

def test_a_recipe_file_named_with_a_newline_is_refused_in_one_line(tmp_path, capsys):
    recipe = tmp_path / "x\ntrust_remote_code: true\n#.yaml"
    recipe.write_text("base: _base/lora.yaml\narch: cpu\nllamafactory:\n  dataset: demo_alpaca\n"
                      "  model_name_or_path: models/tiny-llama\n  template: default\n")
    assert main(["render", str(recipe)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "RECIPE: `x\\ntrust_remote_code: true\\n#` is not a recipe name" in line


def test_the_rendered_header_keeps_any_name_in_its_comment():
    """Defence in depth: whatever reaches the template, the header's values stay on their lines."""
    recipe = dataclasses.replace(recipes.load("tiny-cpu"), name="x\ntrust_remote_code: true\n#")
    out = render.render(recipe, "runs/x\u2028trust_remote_code: true")
    assert "trust_remote_code" not in yaml.safe_load(out.train_yaml)
    assert out.train_yaml.splitlines()[0].endswith("from recipe `x\\ntrust_remote_code: true\\n#` for cpu.")


# N8 (issue 43): a YAML from elsewhere names `deepspeed: ../.docker/config.json`, and `make import` read that file
# of the user's and printed its values as "differences" (registry credentials on the terminal). The JSON stands
# beside the user's folder as ~/.docker/config.json stands beside a download; the import runs with DeepSpeed's
# config model (this venv) and without it (a light host).
DOCKER_CONFIG = {"auths": {"registry.example.com": {"auth": "dXNlcjpzM2NyZXQtcGFzcw=="}}, "credsStore": "pass"}


@pytest.mark.parametrize("stack", ["deepspeed", "light host"])
def test_a_yaml_naming_another_json_never_prints_its_values(stack, project, tmp_path, monkeypatch, capsys):
    if stack == "light host":
        monkeypatch.setattr(where, "auto", lambda arch: where.nowhere("no training stack (test)"))
    (tmp_path / ".docker").mkdir()
    (tmp_path / ".docker" / "config.json").write_text(json.dumps(DOCKER_CONFIG))
    folder = tmp_path / "downloads"
    folder.mkdir()
    monkeypatch.chdir(folder)
    (folder / "train.yaml").write_text(yaml.safe_dump({**TRAIN, "deepspeed": "../.docker/config.json"}))
    code = main(["import", "train.yaml", "ds", "--arch", "gfx942"])
    out, err = capsys.readouterr()
    assert "dXNlcjpzM2NyZXQtcGFzcw==" not in out + err and "pass" not in (out + err).split(), out + err
    assert code == 2 and not list((project / "recipes").glob("ds*")), out + err
    [line] = err.strip().splitlines()
    assert "config.json: not a DeepSpeed config" in line, line


def test_the_value_of_a_key_deepspeed_does_not_know_is_never_printed(project, tmp_path, monkeypatch, capsys):
    """A DeepSpeed JSON with a key DeepSpeed does not read (a typo, or a credential put there): the key is said,
    its value is not."""
    folder = tmp_path / "mine"
    folder.mkdir()
    monkeypatch.chdir(folder)
    ds = {"zero_optimization": {"stage": 3, "stage3_parition_grads": "s3cr3t-in-a-typo"}, "hub_password": "s3cr3t-top"}
    (folder / "ds.json").write_text(json.dumps(ds))
    (folder / "train.yaml").write_text(yaml.safe_dump({**TRAIN, "deepspeed": "ds.json"}))
    main(["import", "train.yaml", "typo", "--arch", "gfx942"])
    out, err = capsys.readouterr()
    assert "s3cr3t" not in out + err, out + err
    assert "zero_optimization.stage3_parition_grads" in out + err and "hub_password" in out + err
