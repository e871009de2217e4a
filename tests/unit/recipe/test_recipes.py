from pathlib import Path

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes

SHIPPED = recipes.shipped()


def keys(report: ProblemReport) -> list[str]:
    return [p.key for p in report.problems]


def test_every_brief_recipe_is_shipped():
    for name in ("llama3-8b-z3", "llama3-8b-lora", "qwen2.5-7b-lora-7900xtx", "llama3-8b-full-z3",
                 "qwen2.5-7b-z3-offload", "tiny-cpu"):
        assert name in SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipe_has_a_user_header(name):
    text = recipes.find(name).read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header and f"RECIPE={name}" in text or "make demo" in text
    assert any("SET=" in line for line in header), "the header shows an override example"


def test_inheritance_deep_merges_and_child_wins():
    r = recipes.load("llama3-8b-z3")
    assert r.llamafactory["finetuning_type"] == "lora"  # from _base/lora.yaml
    assert r.llamafactory["max_grad_norm"] == 1.0  # from _base/sft.yaml
    assert r.llamafactory["per_device_train_batch_size"] == 1  # the recipe's own (packed rows)
    assert r.watchdog["grad_norm_patience"] == 3
    assert [Path(p).name for p in r.chain] == ["sft.yaml", "lora.yaml", "llama3-8b-z3.yaml"]


def test_tiny_recipe_overrides_one_watchdog_key_keeps_the_rest():
    r = recipes.load("tiny-cpu")
    assert r.watchdog["min_steps"] == 2 and r.watchdog["loss_rise_factor"] == 5.0


def test_overrides_are_typed_like_yaml_and_routed():
    r = recipes.load("tiny-cpu", ["learning_rate=5e-5", "nodes=2", "llamafactory.lora_rank=4",
                                   "watchdog.grad_norm_max=7", "dataset=demo_alpaca", "plot_loss=false"])
    assert r.llamafactory["learning_rate"] == 5e-5 and isinstance(r.llamafactory["learning_rate"], float)
    assert r.nodes == 2
    assert r.llamafactory["lora_rank"] == 4
    assert r.watchdog["grad_norm_max"] == 7
    assert r.llamafactory["plot_loss"] is False


def test_override_null_removes_an_inherited_key():
    r = recipes.load("tiny-cpu", ["save_total_limit=null"])
    assert "save_total_limit" not in r.llamafactory


@pytest.mark.parametrize("bad", ["lr", "=3", "a..b=1", ".x=1"])
def test_malformed_override(bad):
    with pytest.raises(ProblemReport) as exc:
        recipes.load("tiny-cpu", [bad])
    assert "key=value" in str(exc.value)


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(ProblemReport) as exc:
        recipes.load("llama3-8b-z4")
    assert "did you mean `llama3-8b-z3`" in str(exc.value)
    with pytest.raises(ProblemReport) as exc:
        recipes.load("nothing-like-it")
    assert "tiny-cpu" in str(exc.value)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_syntax_error_has_line(tmp_path):
    path = write(tmp_path, "bad.yaml", "arch: cpu\nllamafactory:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(path))
    assert "YAML syntax error at line" in str(exc.value)


def test_inheritance_loop(tmp_path):
    write(tmp_path, "a.yaml", "base: b.yaml\narch: cpu\n")
    write(tmp_path, "b.yaml", "base: a.yaml\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(tmp_path / "a.yaml"))
    assert "inheritance loop: a.yaml -> b.yaml -> a.yaml" in str(exc.value)


def test_missing_base(tmp_path):
    path = write(tmp_path, "a.yaml", "base: nowhere.yaml\narch: cpu\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(path))
    assert "base `nowhere.yaml` not found" in str(exc.value)


def test_all_project_level_problems_reported_at_once(tmp_path):
    path = write(tmp_path, "a.yaml", "base: _base/lora.yaml\narch: gfx9999\ngpus_per_node: 0\ndeepspeed: zero4\n"
                                     "precision: half\nlearning_rate: 1\nenv: {HF_TOKEN: x}\n"
                                     "llamafactory: {gpu_ids: 0, output_dir: /tmp/x}\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(path))
    found = keys(exc.value)
    for key in ("arch", "gpus_per_node", "deepspeed", "precision", "learning_rate", "env.HF_TOKEN",
                "llamafactory.gpu_ids", "llamafactory.output_dir"):
        assert key in found, key
    text = str(exc.value)
    assert "llamafactory.learning_rate" in text  # where a stray LF key belongs
    assert "did you mean `zero3`" in text or "did you mean `zero2`" in text


def test_more_gpus_than_the_arch_node_holds():
    with pytest.raises(ProblemReport) as exc:
        recipes.load("qwen2.5-7b-lora-7900xtx", ["gpus_per_node=16"])
    assert "at most 8" in str(exc.value)


def test_unknown_arch_lists_known():
    with pytest.raises(ProblemReport) as exc:
        recipes.load("tiny-cpu", ["arch=gfx943"])
    assert "unknown arch `gfx943`" in str(exc.value)


def test_watchdog_false_disables():
    assert recipes.load("tiny-cpu", ["watchdog=false"]).watchdog is None


def test_resolved_recipe_round_trips_without_base():
    d = recipes.load("llama3-8b-z3").to_dict()
    assert "base" not in d and d["deepspeed"] == "zero3-replicated" and d["llamafactory"]["template"] == "llama3"


def test_set_items_split_at_each_key_and_an_apostrophe_is_text():
    from rocmft.recipe.overrides import split_set
    assert split_set("a=1 b='x y' c=\"it's\" 'd=e f'") == ["a=1", "b=x y", "c=it's", "d=e f"]
    assert split_set("default_system=You're helpful, aren't you? lr=1") == ["default_system=You're helpful, aren't you?", "lr=1"]
    assert split_set("default_system='Answer x=1, don't' x=[1, 2]") == ["default_system=Answer x=1, don't", "x=[1, 2]"]
    assert split_set("x=1' ; echo PWNED ; echo '") == ["x=1' ; echo PWNED ; echo '"]
    assert split_set("lr 5e-5") == ["lr 5e-5"]  # then reported: not key=value
    assert split_set("") == [] and split_set(None) == []


def test_anything_that_looks_like_a_credential_is_refused_in_a_recipe(tmp_path):
    path = write(tmp_path, "a.yaml", "base: tiny-cpu\nenv: {MY_SERVICE_PASSWORD: p, REGISTRY_TOKEN: t, S3_SECRET_ACCESS: s,"
                                     " OPENAI_API_KEY: k, OMP_NUM_THREADS: '2'}\n"
                                     "llamafactory: {hub_token: hf_x, swanlab_api_key: k}\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(path))
    assert keys(exc.value) == ["env.MY_SERVICE_PASSWORD", "env.REGISTRY_TOKEN", "env.S3_SECRET_ACCESS",
                               "env.OPENAI_API_KEY", "llamafactory.hub_token", "llamafactory.swanlab_api_key"]
    assert "list its name under `secrets:`" in str(exc.value)
    # through SET= too
    with pytest.raises(ProblemReport) as exc:
        recipes.load("tiny-cpu", ["hub_token=hf_abc", "env.WANDB_API_KEY=x"])
    assert keys(exc.value) == ["env.WANDB_API_KEY", "llamafactory.hub_token"]


def test_secrets_lists_names_only(tmp_path):
    path = write(tmp_path, "a.yaml", "base: tiny-cpu\nsecrets: [MY_REGISTRY_TOKEN]\n")
    assert recipes.load(str(path)).secrets == ("MY_REGISTRY_TOKEN",)
    bad = write(tmp_path, "b.yaml", "base: tiny-cpu\nsecrets: {MY_TOKEN: value}\n")
    with pytest.raises(ProblemReport) as exc:
        recipes.load(str(bad))
    assert keys(exc.value) == ["secrets"]
