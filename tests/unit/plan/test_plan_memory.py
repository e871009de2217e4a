"""Memory per GPU against public figures, the shipped recipes' claims, and the model's moving parts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rocmft.plan import activations, check, memory, zero3
from rocmft.recipe import recipes

# LLaMA-Factory README's 7B memory figures ("Hardware Requirement") are held, with their source, in
# test_plan_calibration.py's POINTS (one place for the outside figures).


def _shipped(name: str, *overrides: str):
    return check(recipes.load(name, list(overrides)), strict=True)


def test_7b_lora_fits_one_24gb_rx_7900_xtx():
    result = _shipped("qwen2.5-7b-lora-7900xtx")
    assert result.workload.capacity_gib == 24
    assert result.verdict == "fits" and result.fits


def test_8b_lora_on_8_mi300x_zero3_fits():
    result = _shipped("llama3-8b-z3")
    assert result.workload.world_size == 8 and result.workload.zero_stage == 3
    assert result.verdict == "fits"


def test_8b_full_on_8_mi300x_fits_on_zero2_with_liger_and_on_zero3():
    shipped = _shipped("llama3-8b-full-z3")  # ZeRO-2, so Liger stays on (rocmft.recipe.rules turns it off under ZeRO-3)
    assert shipped.workload.zero_stage == 2 and shipped.workload.liger and shipped.verdict == "fits"
    result = _shipped("llama3-8b-full-z3", "deepspeed=zero3")
    assert result.verdict == "fits"
    # ZeRO-3 spreads the ~16 bytes/parameter (128 GB for 8B) over 8 cards; the norms, under the preset's
    # stage3_param_persistence_threshold (1e6), keep their 16-bit weights whole on every card
    n, (_, whole) = 8_030_261_248, zero3.resident(result.workload)
    assert whole == 65 * 4096  # 2 norms per layer + the final one
    states = sum(result.memory.gib(k) for k in ("trainable", "gradients", "optimizer", "master"))
    assert states == pytest.approx((n * 16 / 8 + whole * 2 * 7 / 8) / 2**30, rel=1e-9)


def test_7b_full_on_8_7900xtx_fits_only_with_offload():
    with_offload = _shipped("qwen2.5-7b-z3-offload")
    assert with_offload.verdict == "fits"
    assert with_offload.memory.host_gib_per_node > 100  # the recipe's "~130 GB" of host RAM
    without = _shipped("qwen2.5-7b-z3-offload", "deepspeed=zero3")
    assert without.verdict != "fits"
    assert without.memory.fraction > 0.95
    for preset in ("zero2", "none"):
        assert _shipped("qwen2.5-7b-z3-offload", f"deepspeed={preset}").verdict == "does not fit"


def test_offload_recipe_is_never_told_to_drop_offload():
    result = _shipped("qwen2.5-7b-z3-offload")
    for s in result.suggestions:
        assert not any(o.startswith("deepspeed=") for o in s.overrides), s.line()
        assert "offload is not needed" not in s.text
    assert "offload is not needed" not in result.summary


def test_offload_is_not_needed_for_8b_lora_on_mi300x():
    result = _shipped("llama3-8b-z3", "deepspeed=zero3-offload")
    assert result.verdict == "fits"
    texts = [s.line() for s in result.suggestions]
    assert any("offload is not needed" in t for t in texts), texts
    zero3 = [s for s in result.suggestions if "deepspeed=zero3" in s.overrides]
    assert zero3 and "ZeRO-3 without offload" in zero3[0].text and zero3[0].speed > 1.5
    assert "offload is not needed" in result.summary  # the first suggestion, shown by make train


def test_suggestions_are_ranked_fastest_first_and_all_fit():
    result = _shipped("llama3-8b-full-z3", "disable_gradient_checkpointing=false")
    speeds = [s.speed for s in result.suggestions if s.tier == 1]
    assert speeds == sorted(speeds, reverse=True)
    gc = [s for s in result.suggestions if "disable_gradient_checkpointing=true" in s.overrides]
    assert gc and "faster" in gc[0].line()
    for s in result.suggestions:
        assert s.verdict == "fits" and s.spare_gib > 0


def test_not_fitting_run_gets_ranked_fixes(recipe_factory):
    # Llama-3-8B full fine-tune on one 24 GB card: only CPU offload (more hardware: host RAM) or LoRA fit
    result = check(recipe_factory(arch="gfx1100", model_name_or_path="meta-llama/Meta-Llama-3-8B",
                                  finetuning_type="full"), strict=True)
    assert result.verdict == "does not fit" and not result.fits
    assert result.suggestions
    first = result.suggestions[0]
    assert first.tier == 3 and "deepspeed=zero3-offload" in first.overrides
    assert "host RAM ~" in first.line() and "per node" in first.line()
    assert any("finetuning_type=lora" in s.overrides for s in result.suggestions)
    assert "fix:" in result.summary


# ---------------------------------------------------------------- the moving parts

def _w(recipe_factory, **kw):
    return check(recipe_factory(**kw), strict=True).workload


def test_zero_stages_partition_what_the_paper_says(recipe_factory):
    w = _w(recipe_factory, arch="gfx942", gpus=8, deepspeed="zero3", finetuning_type="full",
           model_name_or_path="meta-llama/Meta-Llama-3-8B")
    n = w.model.total_params
    z3 = memory.estimate(w)
    z2 = memory.estimate(replace(w, deepspeed="zero2"))
    ddp = memory.estimate(replace(w, deepspeed="none"))
    g = 2**30
    whole = zero3.resident(w)[1]  # the norms: under the 10 x hidden_size of "auto" persistence
    assert 0 < whole < 300_000 and z3.gib("trainable") == pytest.approx((2 * (n - whole) / 8 + 2 * whole) / g)
    assert z2.gib("trainable") == pytest.approx(2 * n / g)  # weights replicated
    assert z2.gib("gradients") == pytest.approx(2 * n / 8 / g)  # gradients partitioned
    assert z2.gib("optimizer") == pytest.approx(8 * n / 8 / g)
    # plain DDP: AMP regime, fp32 trainable weights, full copies + DDP buckets
    assert ddp.gib("trainable") == pytest.approx(4 * n / g)
    assert ddp.gib("buffers") == pytest.approx(4 * n / g)
    assert z3.total_gib < z2.total_gib < ddp.total_gib


def test_more_gpus_shrink_zero3_states(recipe_factory):
    w8 = _w(recipe_factory, gpus=8, deepspeed="zero3", finetuning_type="full")
    w16 = replace(w8, nodes=2)
    assert memory.estimate(w16).gib("optimizer") == pytest.approx(memory.estimate(w8).gib("optimizer") / 2)


def test_gradient_checkpointing_and_attention(recipe_factory):
    w = _w(recipe_factory, cutoff_len=4096, per_device_train_batch_size=2)
    on, off = activations.activations_gib(w), activations.activations_gib(replace(w, gradient_checkpointing=False))
    assert off > 5 * on
    eager = activations.activations_gib(replace(w, attention="disabled"))
    assert eager > on  # seq x seq scores of one layer kept
    eager_off = activations.activations_gib(replace(w, attention="disabled", gradient_checkpointing=False))
    assert eager_off - off > 10 * (eager - on)  # ... of every layer (33 vs 2) without checkpointing


def test_logits_buffer_grows_with_the_vocabulary(recipe_factory):
    llama2 = _w(recipe_factory, per_device_train_batch_size=4, cutoff_len=2048)
    llama3 = _w(recipe_factory, per_device_train_batch_size=4, cutoff_len=2048,
                model_name_or_path="meta-llama/Meta-Llama-3-8B")
    assert activations.logits_gib(llama3) / activations.logits_gib(llama2) == pytest.approx(128256 / 32000)
    assert activations.logits_gib(llama3) == pytest.approx(4 * 2048 * 128256 * 12 / 2**30)  # ~11.7 GiB, 12 B measured
    assert activations.logits_gib(replace(llama3, liger=True)) < activations.logits_gib(llama3) / 20


def test_lora_trainable_params(recipe_factory):
    w = _w(recipe_factory, lora_rank=8, lora_target="all")
    # Llama-2-7B, r=8, 7 modules: 32 layers x 8 x (4 x (4096+4096) + 3 x (4096+11008)) = 19,988,480
    assert memory.param_counts(w).trainable == 19_988_480
    w2 = _w(recipe_factory, lora_rank=8, lora_target="q_proj,v_proj")
    assert memory.param_counts(w2).trainable == 32 * 8 * 2 * 8192


def test_quantized_weights(recipe_factory):
    w16 = _w(recipe_factory)
    w4 = _w(recipe_factory, quantization_bit=4)
    w8 = _w(recipe_factory, quantization_bit=8)
    full = memory.estimate(w16).gib("weights")
    assert memory.estimate(w8).gib("weights") < 0.6 * full
    assert memory.estimate(w4).gib("weights") < 0.35 * full


def test_fp32_precision_doubles_weights(recipe_factory):
    bf16 = _w(recipe_factory, arch="gfx942")
    fp32 = _w(recipe_factory, arch="gfx942", precision="fp32")
    assert memory.estimate(fp32).gib("weights") == pytest.approx(2 * memory.estimate(bf16).gib("weights"))


def test_offload_host_ram(recipe_factory):
    w = _w(recipe_factory, arch="gfx1100", gpus=8, deepspeed="zero3-offload", finetuning_type="full",
           model_name_or_path="Qwen/Qwen2.5-7B-Instruct")
    plan = memory.estimate(w)
    # weights 2 + fp32 master 4 + Adam 8 + fp32 gradients 4 = 18 bytes per parameter, one node holds all
    assert plan.host_gib_per_node == pytest.approx(7_615_616_512 * 18 / 2**30)
    assert plan.gib("optimizer") == 0 and plan.gib("offloaded") == 0


def test_verdict_thresholds(recipe_factory):
    w = _w(recipe_factory)
    total = memory.estimate(w).total_gib
    assert memory.estimate(replace(w, capacity_gib=total / 0.89)).verdict == "fits"
    assert memory.estimate(replace(w, capacity_gib=total / 0.95)).verdict == "tight"
    assert memory.estimate(replace(w, capacity_gib=total / 1.01)).verdict == "does not fit"
    assert memory.estimate(replace(w, capacity_gib=None)).verdict == "unknown"


def test_plan_gpu_memory_override(recipe_factory):
    result = check(recipe_factory(arch="gfx942", plan={"gpu_memory_gb": 256}), strict=True)  # MI325X
    assert result.memory.capacity_gib == 256


def test_freeze_trains_the_top_layers(recipe_factory):
    w = _w(recipe_factory, finetuning_type="freeze", freeze_trainable_layers=2)
    assert memory.param_counts(w).trainable == 2 * w.model.layer_params
    assert activations.saved_layers(w) == 2


@pytest.mark.parametrize("name", ["qwen2.5-14b-qlora-7900xtx", "qwen2.5-7b-lora-7900xtx", "qwen2.5-7b-lora-2x7900xtx",
                                  "qwen2.5-7b-dpo-7900xtx", "qwen2.5-7b-z3-offload"])
def test_the_7900xtx_recipes_evaluation_fits_beside_the_training_state(name):
    """An eval pass holds the full logits (Liger's fused loss is training-only) in fp32 for the loss: 10 bytes per
    entry. The issue: at the base's per_device_eval_batch_size 4, qwen2.5-14b-qlora-7900xtx's first eval of packed
    2048-token rows needed ~25 of 24 GiB - a run lost at its first eval, 500 steps in."""
    result = _shipped(name)
    plan, w = result.memory, result.workload
    assert w.evaluates and plan.eval_gib is not None and result.verdict == "fits", (plan.eval_gib, plan.total_gib)
    if name == "qwen2.5-14b-qlora-7900xtx":
        four = memory.estimate(replace(w, eval_batch=4))
        assert four.eval_gib > 24 > four.total_gib and four.verdict == "does not fit"
        logits = 4 * 2048 * w.model.vocab_size * activations.LOGITS_FORWARD_BYTES / 2**30
        # three more packed rows' logits, and their share of one layer's working set (~7% more)
        assert logits * 3 / 4 < four.eval_gib - plan.eval_gib < logits * 3 / 4 * 1.15


# DeepSpeed's own persistence rule (runtime/zero/parameter_offload.py `mark_persistent_parameters`) on tensors of
# the planner's sizes, with "auto" filled by transformers' own rule (integrations/deepspeed.py
# `trainer_config_finalize`), in a child process: the rule logs through deepspeed.comm, which needs a process group.
_DEEPSPEED_RESIDENT = """
import datetime, json, sys, tempfile, types
import torch
from deepspeed.comm import comm
from deepspeed.comm.torch import TorchBackend
from deepspeed.runtime.zero.parameter_offload import DeepSpeedZeRoOffload
from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
torch.distributed.init_process_group("gloo", init_method="file://" + tempfile.mkdtemp() + "/pg", rank=0, world_size=1)
# deepspeed.comm's backend over that group (deepspeed.init_distributed's own branch for a group the caller made). On
# CPU it loads DeepSpeed's shm comm op from TORCH_EXTENSIONS_DIR (the Makefile's .cache/), compiled once (~1 min).
comm.cdb = TorchBackend("gloo", datetime.timedelta(minutes=1), None)
out = []
for sizes, threshold, hidden in json.load(sys.stdin):
    if threshold == "auto":
        ds = HfTrainerDeepSpeedConfig({"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": "auto"}})
        ds.trainer_config_finalize(types.SimpleNamespace(get_warmup_steps=lambda n: 0),
                                   types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=hidden)), 1)
        threshold = ds.config["zero_optimization"]["stage3_param_persistence_threshold"]
    module = torch.nn.Module()
    for i, n in enumerate(sizes):
        p = torch.nn.Parameter(torch.empty(n, device="meta"))
        p.ds_numel = n
        module.register_parameter(f"p{i}", p)
    kept = DeepSpeedZeRoOffload.mark_persistent_parameters(types.SimpleNamespace(module=module), threshold, sys.maxsize)
    out.append([threshold, sum(p.ds_numel for p in kept)])
print(json.dumps(out))
"""


def _deepspeed_resident(cases) -> list[tuple[float, int]]:
    """[(threshold, elements DeepSpeed keeps whole)] for each (workload, its threshold or "auto")."""
    import json
    import subprocess
    import sys

    asked = [[[n for n, _ in zero3.parameters(w)], threshold, w.model.hidden_size] for w, threshold in cases]
    done = subprocess.run([sys.executable, "-c", _DEEPSPEED_RESIDENT], input=json.dumps(asked), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [tuple(x) for x in json.loads(done.stdout.splitlines()[-1])]


def test_zero3_keeps_whole_what_deepspeed_keeps_whole_at_auto_and_at_the_threshold_itself(recipe_factory):
    """The planner's resident and gathered elements against DeepSpeed's own rule: "auto" is transformers' 10 x
    hidden_size (a LoRA A matrix, 8 x 4096, stays whole under it), and a tensor of exactly the threshold stays
    whole (DeepSpeed keeps `ds_numel <= threshold`: the norms, at a threshold of hidden_size)."""
    pytest.importorskip("deepspeed", reason="DeepSpeed's rule needs the CPU training stack (make setup)")
    w = _w(recipe_factory, gpus=8, deepspeed="zero3")  # Llama-2-7B LoRA rank 8: hidden_size 4096
    total = sum(n for n, _ in zero3.parameters(w))
    auto, at_hidden = replace(w, ds_persistence=None), replace(w, ds_persistence=float(w.model.hidden_size))
    deepspeed = _deepspeed_resident([(auto, "auto"), (at_hidden, w.model.hidden_size)])
    for at, (threshold, kept) in zip((auto, at_hidden), deepspeed):
        assert sum(zero3.resident(at)) == kept and zero3.partitioned(at) == total - kept, (at.ds_persistence, kept)
        assert zero3.threshold(at) == threshold
    assert threshold == 4096 and kept == 4096 * (2 * 32 + 1)  # at the threshold: 2 norms a layer + the final one


def test_zero3_linear_swap_keeps_lora_inputs_but_not_qlora_ones(recipe_factory):
    """DeepSpeed's swap replaces F.linear; bitsandbytes' 4-bit linears compute through their own op
    (torch.ops.bitsandbytes.gemm_4bit, autograd/_functions.py MatMul4Bit): memory_efficient_linear changes a
    LoRA run's activations under ZeRO-3, and nothing of a QLoRA run's."""
    def activations_gib(w, swap):
        return memory.estimate(replace(w, ds_mem_efficient_linear=swap)).gib("activations")

    lora = _w(recipe_factory, gpus=2, deepspeed="zero3", lora_target="all", lora_dropout=0.05)
    qlora = _w(recipe_factory, gpus=2, deepspeed="zero3", lora_target="all", lora_dropout=0.05, quantization_bit=4)
    assert activations_gib(lora, True) > activations_gib(lora, False)
    assert activations_gib(qlora, True) == activations_gib(qlora, False)
    assert not [n for n in memory.estimate(qlora).notes if "linear swap" in n]
