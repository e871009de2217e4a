"""`rocmft plan`, `rocmft plan-all` and the planner's promises: fast, no torch, every shipped recipe planned."""

from __future__ import annotations

import subprocess
import sys
import time

from rocmft import recipes
from rocmft.cli.main import main
from rocmft.plan import check


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
    for name in recipes.available():
        assert name in out
    assert "GiB/GPU" in out and "tokens/s/GPU" in out


def test_every_shipped_gpu_recipe_fits():
    for name in recipes.available():
        recipe = recipes.load(name)
        result = check(recipe)
        assert result.fits, f"{name}: {result.summary}"


def test_plan_is_fast():
    names = recipes.available()
    start = time.perf_counter()
    for name in names:
        check(recipes.load(name))
    assert (time.perf_counter() - start) / len(names) < 0.5


def test_planner_imports_no_torch():
    code = ("import sys, rocmft.plan, rocmft.cli.plan, rocmft.cli.plan_all; "
            "bad = [m for m in ('torch', 'transformers', 'deepspeed', 'llamafactory') if m in sys.modules]; "
            "sys.exit(repr(bad) if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False).returncode == 0
