import json

import pytest
import yaml

from rocmft.hardware import arches
from rocmft.io.problems import ProblemReport
from rocmft.recipe import recipes, render
from rocmft.run import runs

SHIPPED = recipes.shipped()


RENDER_ALL = """
import hashlib, json
from rocmft.recipe import recipes, render
out = {}
for name in recipes.shipped():
    r = render.render(recipes.load(name), "runs/x")
    out[name] = hashlib.sha256((r.train_yaml + "\\0" + (r.ds_config or "")).encode()).hexdigest()
print(json.dumps(out))
"""


def test_render_is_byte_stable_across_processes_and_hash_seeds():
    """Two fresh interpreters with different string-hash seeds (set and dict-of-set orders differ between
    them) render every shipped recipe to the same bytes as this process."""
    import hashlib
    import os
    import subprocess
    import sys

    def in_process(seed: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", RENDER_ALL], env={**os.environ, "PYTHONHASHSEED": seed},
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    here = {name: hashlib.sha256((r.train_yaml + "\0" + (r.ds_config or "")).encode()).hexdigest()
            for name in SHIPPED for r in [render.render(recipes.load(name), "runs/x")]}
    assert in_process("1") == in_process("2") == here
    assert sorted(here) == sorted(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_rendered_yaml_is_what_it_says(name):
    r = recipes.load(name)
    out = render.render(r, "runs/x")
    data = yaml.safe_load(out.train_yaml)
    assert data == out.args
    assert data["output_dir"] == "runs/x/output"
    assert ("deepspeed" in data) == (r.deepspeed != "none")
    for key, value in r.llamafactory.items():
        assert data[key] == value  # passed through verbatim


@pytest.mark.parametrize("name", SHIPPED)
def test_yaml_and_deepspeed_precision_agree(name, tmp_path):
    r = recipes.load(name)
    out = render.render(r, "runs/x")
    runs.write_inputs(tmp_path, r.to_dict(), out.train_yaml, out.ds_config)
    if r.deepspeed == "none":  # no DeepSpeed: no JSON rendered, none written, none named in the YAML
        assert out.ds_config is None and not (tmp_path / "ds_config.json").exists() and "deepspeed" not in out.args
        return
    ds = json.loads((tmp_path / "ds_config.json").read_text())
    assert ds["bf16"]["enabled"] is out.args["bf16"]
    assert ds["fp16"]["enabled"] is out.args["fp16"]


@pytest.mark.parametrize("arch", list(arches.table()))
@pytest.mark.parametrize("preset", ["zero2", "zero3", "zero3-replicated", "zero3-offload-optimizer", "zero3-offload"])
def test_precision_per_arch_reaches_both_files(arch, preset):
    # neat packing off: under flash-attn 2 (gfx942, gfx950, gfx90a) its batch 4 is refused (test_rules.py)
    r = recipes.load("tiny-cpu", [f"arch={arch}", "gpus_per_node=1", f"deepspeed={preset}", "neat_packing=false"])
    out = render.render(r, "runs/x")
    ds = json.loads(out.ds_config)
    expected = arches.table()[arch].bf16
    assert out.args["bf16"] is expected and ds["bf16"]["enabled"] is expected
    assert out.args["fp16"] is False and ds["fp16"]["enabled"] is False


def test_fp16_renders_with_a_warning():
    out = render.render(recipes.load("llama3-8b-z3", ["precision=fp16"]), "runs/x")
    assert out.args["fp16"] is True and json.loads(out.ds_config)["fp16"]["enabled"] is True
    assert any("overflow" in w.message for w in out.warnings)


def test_bf16_on_arch_without_it_is_refused_at_render():
    with pytest.raises(ProblemReport):
        render.render(recipes.load("tiny-cpu", ["arch=gfx1030", "precision=bf16"]), "runs/x")


def test_z3_recipe_has_no_offload_and_offload_recipe_does():
    z3 = json.loads(render.render(recipes.load("llama3-8b-z3"), "r").ds_config)["zero_optimization"]
    assert z3["stage"] == 3 and "offload_param" not in z3 and "offload_optimizer" not in z3
    # the 16-bit shards fit the cards: only the optimizer goes to host RAM (issue 21)
    off = json.loads(render.render(recipes.load("qwen2.5-7b-z3-offload"), "r").ds_config)["zero_optimization"]
    assert "offload_param" not in off and off["offload_optimizer"]["device"] == "cpu"
    both = json.loads(render.render(recipes.load("qwen2.5-7b-z3-offload", ["deepspeed=zero3-offload"]), "r")
                      .ds_config)["zero_optimization"]
    assert both["offload_param"]["device"] == "cpu" and both["offload_optimizer"]["device"] == "cpu"
    assert "stage3_parition_grads" not in json.dumps(off)  # the posts' misspelling


def test_attention_default_from_arch_table_and_recipe_wins():
    assert render.render(recipes.load("llama3-8b-lora"), "r").args["flash_attn"] == "fa2"
    assert render.render(recipes.load("qwen2.5-7b-lora-7900xtx"), "r").args["flash_attn"] == "sdpa"
    assert render.render(recipes.load("llama3-8b-lora", ["flash_attn=sdpa"]), "r").args["flash_attn"] == "sdpa"


def test_resume_and_multinode_settings():
    out = render.render(recipes.load("tiny-cpu", ["nodes=2"]), "runs/x", resume_from="runs/a/output/checkpoint-6")
    assert out.args["resume_from_checkpoint"] == "runs/a/output/checkpoint-6"
    assert out.args["data_shared_file_system"] is True


def test_sandbox_refuses_unsafe_template_code(tmp_path):
    from jinja2.exceptions import SecurityError

    env = render.environment()
    with pytest.raises(SecurityError):
        env.from_string("{{ ''.__class__.__mro__[1].__subclasses__() }}").render()


def test_strict_undefined_fails_on_a_missing_variable():
    from jinja2.exceptions import UndefinedError

    with pytest.raises(UndefinedError):
        render.environment().from_string("{{ nope }}").render()


def test_nothing_secret_in_rendered_files(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_supersecret")
    out = render.render(recipes.load("llama3-8b-z3"), "runs/x")
    assert "hf_supersecret" not in out.train_yaml + (out.ds_config or "")
