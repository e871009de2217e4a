"""`rocmft plan`, `rocmft plan-all` and the planner's promises: fast, no torch, every shipped recipe planned."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.plan import check
from rocmft.recipe import recipes


def test_plan_prints_the_breakdown(capsys):
    assert main(["plan", "qwen2.5-7b-lora-7900xtx"]) == 0
    out = capsys.readouterr().out
    for text in ("Memory per GPU (GiB)", "frozen weights", "activations", "logits + loss", "runtime reserve",
                 "verdict: fits", "tokens/s per GPU", "model FLOPs per token",
                 "utilisation (MFU, recompute not counted) assumed 15-35% (docker/arches.yaml gfx1100)",
                 "LoRA activations modelled as on a GPU"):
        assert text in out


def test_plan_summary_and_check(capsys):
    assert main(["plan", "llama3-8b-z3", "--summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan llama3-8b-z3:") and len(out.splitlines()) <= 8
    # 8B full fine-tune on one 24 GB card does not fit: --check makes that an exit code
    args = ["plan", "qwen2.5-7b-lora-7900xtx", "finetuning_type=full", "model_name_or_path=meta-llama/Meta-Llama-3-8B"]
    assert main(args + ["--check"]) == 1
    assert "does not fit" in capsys.readouterr().out


def test_plan_bad_inputs_exit_2(capsys):
    assert main(["plan", "llama3-8b-z3", "--steps", "0"]) == 2
    assert "STEPS" in capsys.readouterr().err
    assert main(["plan", "llama3-8b-z3", "--steps", "x"]) == 2
    assert main(["plan", "llama3-8b-z3", "model_name_or_path=acme/Nope-3B"]) == 2
    err = capsys.readouterr().err
    assert "hidden_size" in err and "models.yaml" in err


def test_plan_all_lists_every_shipped_recipe(capsys):
    assert main(["plan-all"]) == 0
    out = capsys.readouterr().out
    for name in recipes.shipped():
        assert name in out
    assert "GiB/GPU" in out and "tokens/s/GPU" in out


def test_every_shipped_gpu_recipe_fits():
    """The verdict meant: `fits` (under 90% of the GPU), not `tight` and not `unknown`, which also let a run go.
    (The planner's speed is measured by benchmarks/launcher_overhead.py, not asserted here.)"""
    gpu = [name for name in recipes.shipped() if arches.get(recipes.load(name).arch).is_gpu]
    assert gpu and "tiny-cpu" not in gpu
    verdicts = {name: check(recipes.load(name)).verdict for name in gpu}
    assert verdicts == dict.fromkeys(gpu, "fits"), verdicts


def test_the_cpu_recipe_is_unknown_and_says_why():
    result = check(recipes.load("tiny-cpu"))
    assert result.verdict == "unknown" and result.fits  # no GPU memory to compare: the run goes
    assert "cpu has no GPU memory size: not checked" in result.summary


def test_planner_imports_no_torch():
    code = ("import sys, rocmft.plan, rocmft.cli.plan, rocmft.cli.plan_all; "
            "bad = [m for m in ('torch', 'transformers', 'deepspeed', 'llamafactory') if m in sys.modules]; "
            "sys.exit(repr(bad) if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False).returncode == 0


@pytest.mark.parametrize("name,model_line", [
    ("Qwen/Qwen3-30B-A3B", "30.53 B total, 3.35 B active params"),
    ("openai/gpt-oss-20b", "20.91 B total, 4.19 B active params"),
    ("google/gemma-3-12b-it", "12.19B params"),
])
def test_plan_from_a_config_file_of_each_2026_model(tmp_path, capsys, name, model_line):
    """`make plan` with a config.json on disk (the published one's keys, as the table keeps them): a memory verdict,
    a throughput line, and for a MoE both parameter counts."""
    from rocmft.plan import models

    entry = models._table(str(models.TABLE_FILE))[name.lower()]
    folder = tmp_path / name.rsplit("/", 1)[-1]
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({k: v for k, v in entry.items() if k not in ("source", "aliases", "_name")}))
    assert main(["plan", "llama3-8b-z3", f"model_name_or_path={folder}", "disable_gradient_checkpointing=false",
                 "cutoff_len=4096"]) == 0
    out = capsys.readouterr().out
    assert model_line in out and f"[{folder / 'config.json'}]" in out
    assert "verdict: fits" in out and "real tokens/s per GPU" in out
