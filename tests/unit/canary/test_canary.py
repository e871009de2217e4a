"""The canary's decisions as data: numerics of real recipes, the reference, the bisection order and its SET=,
the tolerance's numbers, the verdicts; and a GPU recipe's canary runs planned for its arch (rendered train.yaml
and the launch plan of one GPU), as the Docker runtime tests do: nothing here trains (tests/train/test_canary_cpu.py does)."""

from __future__ import annotations

import argparse

import pytest
import yaml

from rocmft import canary, pipeline
from rocmft.cli import canary as cli
from rocmft.hardware import arches
from rocmft.recipe import recipes


def test_numerics_of_real_recipes():
    assert canary.numerics_of(recipes.load("tiny-cpu")) == canary.Numerics("fp32", "sdpa", False, "neat")
    gpu = canary.numerics_of(recipes.load("llama3-8b-lora"))
    assert (gpu.precision, gpu.attention, gpu.liger) == ("bf16", "fa2", True)
    assert canary.reference(gpu) == canary.Numerics("fp32", "sdpa", False, gpu.packing)  # packing kept: same batches


def test_bisection_changes_one_component_at_a_time_cheapest_first():
    steps = canary.bisection(canary.Numerics("bf16", "fa2", True, "neat"))
    assert [(name, set_text) for name, _, set_text in steps] == [
        ("Liger", "enable_liger_kernel=false"), ("attention", "flash_attn=sdpa"), ("precision", "precision=fp32")]
    assert [n for _, n, _ in steps] == [canary.Numerics("bf16", "fa2", False, "neat"),
                                        canary.Numerics("bf16", "sdpa", True, "neat"),
                                        canary.Numerics("fp32", "fa2", True, "neat")]
    assert canary.bisection(canary.Numerics("fp32", "sdpa", False, "none")) == []


def test_tolerance_is_2ku_of_the_precision():
    assert canary.tolerance("bf16", 1) == pytest.approx(2 * 2 ** -8)  # 7.8e-3
    assert canary.tolerance("bf16", 4) == pytest.approx(8 * 2 ** -8)
    assert canary.tolerance("fp16", 2) == pytest.approx(4 * 2 ** -11)
    assert canary.tolerance("fp32", 1) == pytest.approx(2 * 1024 * 2 ** -24)  # the reorder floor, not 2^-23


def _steps(*pairs):
    return [{"step": i, "loss": loss, "grad_norm": g} for i, (loss, g) in enumerate(pairs, start=1)]


REF = _steps((7.0, 2.0), (6.8, 1.5), (6.5, 1.2))


def test_verdicts():
    # bf16 on CPU measured 2.4e-4 (loss) and 3.3e-3 (grad norm, step 1) from fp32: inside 2ku.
    close = _steps((7.0 * (1 + 2.4e-4), 2.0 * (1 + 3.3e-3)), (6.8, 1.5), (6.5, 1.2))
    assert canary.compare(close, REF, "bf16", 3).verdict == "agrees"
    far = _steps((7.0, 2.0), (6.8, 1.5), (6.5 * 1.05, 1.2))
    result = canary.compare(far, REF, "bf16", 3)
    assert result.verdict == "diverges" and result.worst["step"] == 3 and result.worst["quantity"] == "loss"
    assert canary.compare(far, REF, "fp32", 3).verdict == "diverges"
    nan = _steps((7.0, 2.0), (float("nan"), float("nan")), (float("nan"), float("nan")))
    result = canary.compare(nan, REF, "fp16", 3)
    assert result.verdict == "non-finite" and result.worst["step"] == 2
    assert canary.compare(nan[:1], REF, "fp16", 3).verdict == "failed"  # a crashed run logged fewer steps
    assert canary.compare(REF, REF[:2], "fp16", 3).verdict == "failed"  # no reference, no verdict


def test_a_gradient_norm_alone_past_its_tolerance_diverges():
    """A backward-only kernel bug (flash-attn's or Liger's backward): step 1's loss is the reference's to the last
    bit, its gradient norm is 5% off; the losses of later steps stay within bf16's 2ku. Only the gradient norm
    can tell, and it must."""
    backward_bug = _steps((7.0, 2.0 * 1.05), (6.8 * (1 + 1e-3), 1.5), (6.5 * (1 + 1e-3), 1.2))
    result = canary.compare(backward_bug, REF, "bf16", 3)
    assert result.verdict == "diverges", result
    assert (result.worst["step"], result.worst["quantity"]) == (1, "grad_norm")
    assert result.worst["relative"] == pytest.approx(0.05)
    nan_grad = _steps((7.0, float("inf")), (6.8, 1.5), (6.5, 1.2))  # a finite loss over an overflowed backward
    result = canary.compare(nan_grad, REF, "bf16", 3)
    assert (result.verdict, result.worst["quantity"]) == ("non-finite", "grad_norm")


def test_models_start_from_the_same_values():
    tested = canary.Numerics("bf16", "fa2", True, "neat")
    assert canary.model_for(tested, tested) == ("bfloat16", False)  # stored in bf16, as Hub checkpoints are
    assert canary.model_for(canary.reference(tested), tested) == ("bfloat16", True)  # the same values, in fp32
    fp32 = canary.Numerics("fp32", "sdpa", False, "neat")
    assert canary.model_for(fp32, fp32) == ("float32", False)


def _args(**kw):
    base = dict(recipe="llama3-8b-lora", overrides=[], set_string="", arch=None, gpus=None, runtime="docker",
                docker_image=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_gpu_recipe_canary_runs_planned_for_its_arch_as_data(tmp_path, monkeypatch):
    """llama3-8b-lora (gfx942, 8 GPUs, bf16 + FA2 + Liger) -> two runs of the tiny model on ONE GPU of gfx942, with
    the arch's environment, differing only in numerics and in the model's storage dtype."""
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    args = _args()
    recipe = recipes.load(args.recipe)
    tested, ref, _ = cli.variants(recipe)
    preps = {label: cli.prepare(args, recipe, tested, numerics, f"c-{label}", canary.STEPS, validate=False)
             for label, numerics in (("recipe", tested), ("reference", ref))}
    got = {k: yaml.safe_load(p.rendered.train_yaml) for k, p in preps.items()}
    assert (got["recipe"]["bf16"], got["recipe"]["flash_attn"], got["recipe"]["enable_liger_kernel"]) == (True, "fa2", True)
    assert (got["reference"]["bf16"], got["reference"]["flash_attn"], got["reference"]["enable_liger_kernel"]) == (False, "sdpa", False)
    assert got["recipe"]["model_name_or_path"] == "models/tiny-llama-bf16"
    assert got["reference"]["model_name_or_path"] == "models/tiny-llama-bf16-fp32"
    same = ("seed", "dataset", "max_steps", "learning_rate", "cutoff_len", "per_device_train_batch_size",
            "neat_packing", "logging_nan_inf_filter", "save_strategy", "eval_strategy")
    assert {k: got["recipe"].get(k) for k in same} == {k: got["reference"].get(k) for k in same}
    assert got["recipe"]["max_steps"] == canary.STEPS and got["recipe"]["logging_nan_inf_filter"] is False
    assert got["recipe"]["learning_rate"] == recipe.llamafactory["learning_rate"]  # the recipe's own step size
    assert "deepspeed" not in got["recipe"] and "use_cpu" not in got["recipe"]
    for prep in preps.values():
        plan = pipeline.build_plan(prep, python="python", env={})
        assert (plan.arch, plan.nproc_per_node, plan.nnodes, plan.distributed) == ("gfx942", 1, 1, False)
        assert plan.env["ROCR_VISIBLE_DEVICES"] == "0"  # one GPU of the arch
        assert plan.env["HIP_FORCE_DEV_KERNARG"] == arches.get("gfx942").env["HIP_FORCE_DEV_KERNARG"]
        assert plan.argv == ("python", "-u", "-m", "rocmft.worker", "--run-dir", prep.run_path)  # no torchrun: 1 process


def test_a_recipe_whose_numerics_are_the_references_is_run_once(tmp_path, monkeypatch, capsys):
    """tiny-cpu (fp32, SDPA, no Liger) is its own reference: one run, recorded under both names with a note, not a
    second identical run (tests/train/test_canary_cpu.py compares two real runs: bf16 against fp32). The runs are
    prepared as `make train` prepares them; their launch is replaced by the steps such a run logs."""
    from rocmft.cli.main import build_parser

    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    launched = []

    def launch(args, module, prep):
        launched.append(prep.run_dir.name)
        return 0, _steps((7.0, 2.0), (6.8, 1.5), (6.5, 1.2), (6.4, 1.1))

    monkeypatch.setattr(cli, "_run", launch)
    args = build_parser().parse_args(["canary", "tiny-cpu", "--runtime", "local"])
    assert cli.run(args) == 0
    [folder] = [p for p in (tmp_path / "runs").iterdir() if (p / "canary.json").is_file()]
    record = yaml.safe_load((folder / "canary.json").read_text())
    assert launched == [f"{folder.name}-reference"]
    assert record["runs"]["recipe"]["run"] == record["runs"]["reference"]["run"]
    assert record["runs"]["recipe"]["note"] == "the recipe's numerics are the reference's: one run"
    assert record["verdict"] == "agrees" and record["bisection"] == []
    assert ": agrees" in capsys.readouterr().out
