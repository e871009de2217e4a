"""FLOPs per token, tokens/s from the arch peak and the utilisation range, and the time for the dataset."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from rocmft.hardware import arches
from rocmft.io.problems import ProblemReport
from rocmft.plan import check, dataset, steptime, throughput, workload, zero3
from rocmft.plan.workload import DEFAULT_MFU


def _w(recipe_factory, **kw):
    return check(recipe_factory(**kw), strict=True).workload


def test_full_fine_tune_is_6n_plus_attention(recipe_factory):
    w = _w(recipe_factory, finetuning_type="full", disable_gradient_checkpointing=True, cutoff_len=2048)
    m = w.model
    n = m.matmul_params
    expected = 6 * n + 12 * m.num_hidden_layers * m.q_dim * 2048  # PaLM appendix B
    assert throughput.flops_per_token(w)[0] == pytest.approx(expected)


def test_lora_skips_weight_gradients_and_checkpointing_adds_a_forward(recipe_factory):
    full = _w(recipe_factory, finetuning_type="full", disable_gradient_checkpointing=True)
    lora = _w(recipe_factory, finetuning_type="lora", disable_gradient_checkpointing=True)
    f_full, f_lora = throughput.flops_per_token(full)[0], throughput.flops_per_token(lora)[0]
    assert 0.64 < f_lora / f_full < 0.70  # ~4N / 6N
    # Model FLOPs (what MFU counts) do not change with checkpointing; the recompute is a speed factor.
    gc = replace(full, gradient_checkpointing=True)
    assert throughput.flops_per_token(gc)[0] == f_full
    m = full.model
    extra = m.num_hidden_layers * (2 * m.layer_linear_params + 4 * m.q_dim * full.cutoff_len)
    assert throughput.recompute_flops(gc) == pytest.approx(extra) and throughput.recompute_flops(full) == 0
    factors = dict(throughput.speed_factors(gc))
    assert factors["gradient checkpointing recompute"] == pytest.approx(f_full / (f_full + extra))
    # the recipe comments' "~25% faster without recompute" for a full fine-tune
    assert throughput.gpu_relative_speed(full, gc) == pytest.approx(1.31, abs=0.03)


def test_lora_has_its_own_factor_for_unfused_adapters(recipe_factory):
    lora = _w(recipe_factory, finetuning_type="lora", disable_gradient_checkpointing=True)
    assert dict(throughput.speed_factors(lora))["PEFT LoRA adapters, unfused"] == throughput.LORA_FACTOR < 1
    full = replace(lora, method="full")
    assert "PEFT LoRA adapters, unfused" not in dict(throughput.speed_factors(full))
    # fewer FLOPs, but not the full 1.5x: PEFT's adapter work eats part of it
    assert 1.0 < throughput.gpu_relative_speed(lora, full) < 1.5 * 0.8


def test_tokens_per_second_from_peak_mfu_and_factors(recipe_factory):
    # 4 x 8192 tokens: GPU-bound (the host floor below does not bind)
    w = _w(recipe_factory, arch="gfx942", per_device_train_batch_size=4, cutoff_len=8192,
           plan={"mfu": [0.3, 0.4]})
    tp = throughput.estimate(w, None)
    flops = throughput.flops_per_token(w)[0]
    assert tp.peak_tflops == 1307.4 and w.mfu_source == "plan.mfu"
    assert tp.factor == pytest.approx(math.prod(f for _, f in throughput.speed_factors(w)))
    assert tp.tokens_per_s_gpu == pytest.approx((0.3 * 1307.4e12 / flops * tp.factor, 0.4 * 1307.4e12 / flops * tp.factor))


def test_utilisation_defaults_per_arch(recipe_factory):
    # MI300X's best bf16 GEMM is 51-60% of its datasheet peak (H100: 80%): a lower range than the generic one
    mi300x = _w(recipe_factory, arch="gfx942")
    assert mi300x.mfu == arches.get("gfx942").mfu and mi300x.mfu_source == "docker/arches.yaml gfx942"
    assert mi300x.mfu[1] < DEFAULT_MFU[1] and mi300x.mfu[1] <= 0.6 * 0.6
    assert _w(recipe_factory, arch="gfx90a").mfu[0] > mi300x.mfu[0]  # MI250X GEMMs reach 77% of peak
    for arch in arches.table().values():
        if arch.is_gpu:
            assert arch.mfu is not None and 0 < arch.mfu[0] < arch.mfu[1] < 0.6, arch.name
    assert _w(recipe_factory, arch="gfx942", plan={"mfu": 0.5}).mfu == (0.5, 0.5)


def test_zero3_gathers_cost_more_for_small_micro_batches_and_across_nodes(recipe_factory):
    w = _w(recipe_factory, arch="gfx942", gpus=8, deepspeed="zero3", finetuning_type="full",
           model_name_or_path="meta-llama/Meta-Llama-3-70B", cutoff_len=2048, per_device_train_batch_size=2)
    big = throughput.zero3_factor(replace(w, micro_batch=8))
    mid = throughput.zero3_factor(w)
    small = throughput.zero3_factor(replace(w, micro_batch=1))
    assert 0 < small < mid < big < 1  # weights are gathered every micro-batch: fewer tokens share the cost
    assert throughput.zero3_factor(replace(w, nodes=2)) < mid  # between nodes the links are slower
    name = next(n for n, _ in throughput.speed_factors(w) if n.startswith("ZeRO-3"))
    assert "4096 tokens" in name
    assert throughput.zero3_factor(replace(w, peak_tflops=None)) == throughput.ZERO3_FACTOR_NO_PEAK


def test_zero3_on_part_of_an_mi300x_node_uses_only_the_links_between_its_gpus(recipe_factory):
    # AMD: each pair of the 8 GPUs has its own link; 2 GPUs share 1 of each GPU's 7. With overlap off,
    # exposed comm = compute x (1/factor - 1), and the compute per micro-batch is the same on 2 and 8 GPUs.
    w = _w(recipe_factory, arch="gfx942", gpus=8, deepspeed="zero3", finetuning_type="full", cutoff_len=2048)
    w = replace(w, ds_overlap_comm=False)
    comm = {n: 1 / throughput.zero3_factor(replace(w, gpus_per_node=n)) - 1 for n in (2, 8)}
    # bytes x (W-1)/W over bandwidth x (W-1)/7: (1/2) / (1/7) against (7/8) / 1
    assert comm[2] / comm[8] == pytest.approx((0.5 * 7) / (7 / 8))
    rdna = replace(w, arch_family="rdna3")  # PCIe: no mesh, the same link whatever the count
    comm = {n: 1 / throughput.zero3_factor(replace(rdna, gpus_per_node=n)) - 1 for n in (2, 8)}
    assert comm[2] / comm[8] == pytest.approx(0.5 / (7 / 8))


def test_offload_and_zero3_and_quantization_cost_speed(recipe_factory):
    w = _w(recipe_factory, gpus=8, deepspeed="zero3", cutoff_len=2048)
    z3 = throughput.zero3_factor(w)
    assert throughput.gpu_relative_speed(replace(w, deepspeed="zero3-offload"), w) == pytest.approx(0.5 / z3)
    assert throughput.gpu_relative_speed(replace(w, deepspeed="zero2"), w) == pytest.approx(1 / z3)
    # 4 bits: dequantisation traffic against 2,048-token micro-batches on an MI300X, a few percent (test_plan_quant.py
    # pins the arithmetic); LLM.int8's kernels: a flat factor
    assert 0.9 < throughput.gpu_relative_speed(replace(w, quant_bits=4), w) < 1.0
    # (ZeRO-3 gathers the quantised weights' packed storage: fewer bytes than the 16-bit ones)
    q8 = replace(w, quant_bits=8)
    assert throughput.gpu_relative_speed(q8, w) == pytest.approx(0.5 * throughput.zero3_factor(q8) / z3)
    assert throughput.zero3_factor(q8) > z3


def test_arch_without_a_peak_plans_memory_only(recipe_factory):
    # gfx1030 has no bf16 matrix units: the arch table lists no bf16 peak
    result = check(recipe_factory(arch="gfx1030", precision="bf16"), strict=True)
    assert result.memory is not None and result.memory.capacity_gib == 16
    assert result.throughput.tokens_per_s_gpu is None
    assert "memory plan only" in result.report()
    assert "memory plan only" in result.summary
    cpu = check(recipe_factory(arch="cpu"), strict=True)
    assert cpu.verdict == "unknown" and cpu.fits and cpu.throughput.tokens_per_s_gpu is None


def _data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps({"instruction": str(i)}) + "\n" for i in range(100)))
    (folder / "b.json").write_text(json.dumps([{"x": i} for i in range(30)]))
    (folder / "c.csv").write_text("col\n" + "".join(f"{i}\n" for i in range(10)))
    (folder / "dataset_info.json").write_text(json.dumps({
        "a": {"file_name": "a.jsonl"}, "b": {"file_name": "b.json"}, "c": {"file_name": "c.csv"},
        "hub": {"hf_hub_url": "org/data"}}))
    return folder


def test_dataset_rows_are_counted(tmp_path):
    folder = _data(tmp_path)
    assert dataset.count({"dataset": "a,b,c", "dataset_dir": str(folder)}).rows == 140
    assert dataset.count({"dataset": "a", "dataset_dir": str(folder), "max_samples": 40}).rows == 40
    assert dataset.count({"dataset": "a", "dataset_dir": str(folder), "val_size": 0.1}).rows == 90
    hub = dataset.count({"dataset": "a,hub", "dataset_dir": str(folder)})
    assert hub.rows is None and "hub dataset" in hub.notes[0]
    assert dataset.count({"dataset": "nope", "dataset_dir": str(folder)}).rows is None


def test_time_for_the_dataset_is_an_upper_bound(recipe_factory, tmp_path):
    folder = _data(tmp_path)
    result = check(recipe_factory(arch="gfx942", dataset="a", dataset_dir=str(folder), num_train_epochs=2.0,
                                  cutoff_len=1000, per_device_train_batch_size=4, gradient_accumulation_steps=5),
                   strict=True)
    t = result.throughput.time
    assert t.tokens == 100 * 2 * 1000 and t.upper_bound
    assert t.steps == 2 * math.ceil(100 / 4) // 5
    lo, hi = result.throughput.tokens_per_s_gpu
    assert t.seconds == pytest.approx((t.tokens / hi, t.tokens / lo))
    assert "upper bound" in result.report()
    closer = check(recipe_factory(arch="gfx942", dataset="a", dataset_dir=str(folder), cutoff_len=1000,
                                  plan={"avg_tokens": 250}), strict=True)
    assert closer.throughput.time.tokens == 100 * 250 and not closer.throughput.time.upper_bound


def test_max_steps_and_explicit_steps(recipe_factory):
    result = check(recipe_factory(arch="gfx942", max_steps=50, per_device_train_batch_size=2,
                                  gradient_accumulation_steps=3, cutoff_len=512), strict=True)
    assert result.throughput.time.steps == 50 and result.throughput.time.tokens == 50 * 6 * 512
    steps = check(recipe_factory(arch="gfx942", cutoff_len=512), steps=7, strict=True)
    assert steps.throughput.time.steps == 7


@pytest.mark.parametrize("bad", [0, -1])
def test_steps_must_be_positive(recipe_factory, bad):
    with pytest.raises(ProblemReport, match="STEPS"):
        check(recipe_factory(), steps=bad)


def test_nothing_to_train_is_bad_input(recipe_factory):
    with pytest.raises(ProblemReport, match="nothing to train"):
        check(recipe_factory(num_train_epochs=0, max_steps=-1), strict=True)


def test_a_small_step_is_host_bound_and_accumulation_spreads_the_floor(recipe_factory):
    """gpu_truth on an H200: 4 short padded rows took 0.568 s a step for a few ms of GPU work (docs/bench.md)."""
    w = _w(recipe_factory, arch="gfx942", per_device_train_batch_size=1, cutoff_len=256, plan={"mfu": [0.3, 0.4]})
    floor = steptime.HOST_S_PER_LAYER * w.model.num_hidden_layers
    real = float(w.tokens_per_micro_batch)  # no lengths: every row at cutoff_len
    tp = throughput.estimate(w, None)
    assert tp.tokens_per_s_gpu == pytest.approx((real / floor, real / floor))
    assert any(name.startswith("host-bound") for name, _ in tp.host)
    accumulated = throughput.estimate(replace(w, grad_accum=8), None)
    assert accumulated.tokens_per_s_gpu[0] == pytest.approx(8 * real / floor)  # 8 micro-batches under one floor


def _step_s(w, tps):
    """Seconds of one micro-batch (accumulation 1) at `tps` real tokens/s."""
    return float(w.tokens_per_micro_batch) / tps


def test_zero3_hooks_by_fetch_path(recipe_factory):
    """gpu_truth on an H200: the same packed LoRA step took 1.504 s (first run) and 1.768 s (second) with ZeRO-3 on
    one process, 1.136 / 1.144 s without: the hooks' range. How they add depends on the path (steptime.py)."""
    w = _w(recipe_factory, arch="gfx942", per_device_train_batch_size=4, cutoff_len=8192, plan={"mfu": [0.3, 0.4]})
    plain = throughput.estimate(w, None).tokens_per_s_gpu
    hooks = [h * w.model.num_hidden_layers for h in steptime.ZERO3_HOOK_S_PER_LAYER]
    assert hooks == pytest.approx([0.368, 0.624])
    # one rank, base partitioned (the measured path): added at both ends, the slow end with the larger figure
    one = replace(w, deepspeed="zero3")
    assert zero3.fetch_path(one) == zero3.ONE_RANK
    z3 = throughput.estimate(one, None).tokens_per_s_gpu
    assert _step_s(w, z3[1]) == pytest.approx(_step_s(w, plain[1]) + hooks[0], rel=1e-6)
    assert _step_s(w, z3[0]) == pytest.approx(_step_s(w, plain[0]) + hooks[1], rel=1e-6)
    # nothing partitioned: host work beside a GPU-bound step, so plain speed (less the per-step local re-gather: none
    # on one rank); on 8 ranks the resident weights' all-gather after each step is the only cost left
    lean = workload.with_preset(w, "zero3-replicated")
    assert zero3.fetch_path(lean) == zero3.RESIDENT and zero3.partitioned(lean) == 0
    assert throughput.estimate(lean, None).tokens_per_s_gpu == pytest.approx(plain, rel=1e-6)
    lean8, plain8 = replace(lean, gpus_per_node=8), replace(w, gpus_per_node=8)
    regather = steptime.regather_s(lean8, throughput.link_gbps(lean8))
    assert sum(zero3.resident(lean8)) > w.model.total_params  # the base and the adapters
    assert regather == pytest.approx(sum(zero3.resident(lean8)) * 2 * 7 / 8 / 310e9, rel=1e-9)
    fast = throughput.estimate(lean8, None).tokens_per_s_gpu[1]
    assert _step_s(w, fast) == pytest.approx(_step_s(w, throughput.estimate(plain8, None).tokens_per_s_gpu[1])
                                             + regather, rel=1e-3)  # (+ the LoRA gradients' reduce-scatter)
    # several ranks, base partitioned: hidden at the fast end, added at the slow end
    part8 = replace(one, gpus_per_node=8)
    assert zero3.fetch_path(part8) == zero3.RANKS
    gpu8 = throughput.gpu_rate(part8)
    z8 = throughput.estimate(part8, None).tokens_per_s_gpu
    assert _step_s(w, z8[1]) == pytest.approx(_step_s(w, gpu8[1]) + steptime.regather_s(part8, throughput.link_gbps(part8)))
    assert _step_s(w, z8[0]) == pytest.approx(_step_s(w, gpu8[0]) + hooks[1]
                                              + steptime.regather_s(part8, throughput.link_gbps(part8)))
