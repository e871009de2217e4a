"""Per-product figures inside an arch (issue 15): the planner recognises an MI300A, MI300X, MI250 ... from a
fake /sys/class/kfd topology (the tree host.py reads on a real node), or takes `plan.product`."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmft import plan as planner
from rocmft.hardware import arches, host
from rocmft.io.problems import ProblemReport
from rocmft.plan import workload

from .conftest import make_recipe

TABLE = arches.table()


def kfd_tree(base: Path, gpus: int, *, device_id: int, cus: int, gfx: int = 90402) -> Path:
    """A KFD topology as the amdgpu driver writes it: node 0 the CPU, then one node per GPU (decimal values)."""
    topo = base / "topology" / "nodes"
    cpu = topo / "0"
    cpu.mkdir(parents=True)
    (cpu / "properties").write_text("cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\n")
    for i in range(gpus):
        node = topo / str(i + 1)
        node.mkdir()
        (node / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {cus * 4}\nsimd_per_cu 4\ngfx_target_version {gfx}\n"
            f"vendor_id 4098\ndevice_id {device_id}\nlocation_id {(0x0c + i) << 8}\ndomain 0\n"
            f"drm_render_minor {128 + 8 * i}\nmax_engine_clk_fcompute 2100\nlocal_mem_size 0\n")
    return topo


def test_mi300a_host_plans_with_the_apu_figures(tmp_path, monkeypatch):
    # MI300A: PCI id 74A0 (libdrm data/amdgpu.ids), 228 CUs (AMD GPU specifications table), 128 GB HBM3 shared
    # with the CPU; 228 CUs x 2.1 GHz x 2048 BF16 FLOPs/clock/CU (mi300.md) = 980.6 TFLOP/s dense.
    monkeypatch.setattr(host, "KFD_TOPOLOGY", str(kfd_tree(tmp_path, 4, device_id=0x74A0, cus=228)))
    result = planner.check(make_recipe(gpus=4))
    w = result.workload
    assert (w.product, w.capacity_gib, w.peak_tflops, w.node_gpus, w.unified_memory) == ("MI300A", 128, 980.6, 4, True)
    assert w.product_source == "detected on this host: 4 x MI300A (/sys/class/kfd)"
    assert "4 x gfx942 MI300A" in result.report() and "128 GiB each" in result.report()


def test_mi300x_host_plans_with_the_mi300x_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "KFD_TOPOLOGY", str(kfd_tree(tmp_path, 8, device_id=0x74A1, cus=304)))
    w = planner.check(make_recipe(gpus=8)).workload
    assert (w.product, w.capacity_gib, w.peak_tflops, w.node_gpus, w.unified_memory) == ("MI300X", 192, 1307.4, 8, False)
    assert w.product_source.startswith("detected on this host: 8 x MI300X")


def test_the_same_recipe_differs_only_by_the_detected_product(tmp_path):
    a = host.gpus_from_sysfs(kfd_tree(tmp_path / "a", 4, device_id=0x74A0, cus=228))
    x = host.gpus_from_sysfs(kfd_tree(tmp_path / "x", 4, device_id=0x74A1, cus=304))
    # 4 x 8192 tokens a micro-batch: GPU-bound on both, so only the products' peaks differ
    wa, _ = workload.from_recipe(make_recipe(gpus=4, cutoff_len=8192, per_device_train_batch_size=4), gpus=a)
    wx, _ = workload.from_recipe(make_recipe(gpus=4, cutoff_len=8192, per_device_train_batch_size=4), gpus=x)
    ta = planner.plan_workload(wa)[1].tokens_per_s_gpu
    tx = planner.plan_workload(wx)[1].tokens_per_s_gpu
    assert ta[0] / tx[0] == pytest.approx(228 / 304, rel=0.01)  # same clock, fewer CUs


def test_no_gpu_host_plans_the_arch_first_product():
    w, problems = workload.from_recipe(make_recipe(gpus=8), gpus=[])
    assert (w.product, w.capacity_gib) == ("MI300X", 192)
    assert w.product_source == "the first gfx942 product in docker/arches.yaml"
    assert not problems


def test_plan_product_wins_over_detection(tmp_path):
    gpus = host.gpus_from_sysfs(kfd_tree(tmp_path, 8, device_id=0x74A1, cus=304))
    w, _ = workload.from_recipe(make_recipe(gpus=8, plan={"product": "MI325X"}), gpus=gpus)
    assert (w.product, w.capacity_gib, w.peak_tflops, w.product_source) == ("MI325X", 256, 1307.4, "plan.product")


def test_unknown_plan_product_is_one_error_with_the_arch_products():
    with pytest.raises(ProblemReport) as err:
        workload.from_recipe(make_recipe(plan={"product": "MI300"}), gpus=[])
    (problem,) = err.value.problems
    assert problem.key == "plan.product" and "MI300X" in problem.suggestion


def test_unrecognised_device_warns_and_uses_the_first_product(tmp_path):
    gpus = host.gpus_from_sysfs(kfd_tree(tmp_path, 8, device_id=0x74A2, cus=80))  # MI308X: not in the table
    w, problems = workload.from_recipe(make_recipe(gpus=8), gpus=gpus)
    assert w.product == "MI300X"
    assert [p.severity for p in problems] == ["warning"] and "0x74a2" in problems[0].message


def test_compute_partition_is_named(tmp_path):
    gpus = host.gpus_from_sysfs(kfd_tree(tmp_path, 8, device_id=0x74A1, cus=38))  # CPX: 1 XCD per GPU
    w, problems = workload.from_recipe(make_recipe(gpus=8), gpus=gpus)
    assert w.product == "MI300X"
    assert any("38 of the MI300X's 304 CUs" in p.message for p in problems)


@pytest.mark.parametrize("cus,product,peak", [(110, "MI250X", 191.5), (104, "MI250", 181.0)])
def test_mi250x_and_mi250_share_a_device_id_and_differ_by_cus(tmp_path, cus, product, peak):
    # amdgpu.ids: "740C, 01, AMD Instinct MI250X / MI250"; per GCD 110 vs 104 CUs (gpu-specs table).
    gpus = host.gpus_from_sysfs(kfd_tree(tmp_path, 8, device_id=0x740C, cus=cus, gfx=90010))
    w, _ = workload.from_recipe(make_recipe(arch="gfx90a", gpus=8), gpus=gpus)
    assert (w.product, w.peak_tflops, w.capacity_gib) == (product, peak, 64)


def test_mi350x_by_device_id(tmp_path):
    # amdgpu.ids: 75A0 MI350X, 75A3 MI355X; 2.2 vs 2.4 GHz peak engine clock.
    gpus = host.gpus_from_sysfs(kfd_tree(tmp_path, 8, device_id=0x75A0, cus=256, gfx=90500))
    w, _ = workload.from_recipe(make_recipe(arch="gfx950", gpus=8), gpus=gpus)
    assert (w.product, w.peak_tflops) == ("MI350X", 2306.9)


def test_apu_gets_no_cpu_offload_and_no_fifth_gpu_per_node():
    # Llama-3-70B full fine-tune on 4 GPUs does not fit either product. On an MI300A, "host RAM" is the APU's
    # own memory (offloading frees nothing) and a node holds 4: the way out is more nodes, not 8 per node.
    def plan(product):
        r = planner.check(make_recipe(gpus=4, plan={"product": product}, finetuning_type="full",
                                      model_name_or_path="meta-llama/Meta-Llama-3-70B"))
        assert r.verdict == "does not fit" and r.suggestions
        return [" ".join(s.overrides) for s in r.suggestions]

    apu = plan("MI300A")
    assert not any("offload" in s or "gpus_per_node" in s for s in apu)
    assert any("nodes=" in s for s in apu)
    gpu = plan("MI300X")
    assert any("deepspeed=zero3-offload" in s for s in gpu) and any("gpus_per_node=8" in s for s in gpu)


def test_a_w7900_workstation_plans_with_48_gb_and_a_7900_xt_without_a_peak(tmp_path):
    w7900 = host.gpus_from_sysfs(kfd_tree(tmp_path / "w", 1, device_id=0x7448, cus=96, gfx=110000))
    w, _ = workload.from_recipe(make_recipe(arch="gfx1100"), gpus=w7900)
    assert (w.product, w.capacity_gib, w.peak_tflops) == ("Radeon PRO W7900", 48, 122.8)
    xt = host.gpus_from_sysfs(kfd_tree(tmp_path / "x", 1, device_id=0x744C, cus=84, gfx=110000))
    w, _ = workload.from_recipe(make_recipe(arch="gfx1100"), gpus=xt)
    assert (w.product, w.capacity_gib, w.peak_tflops) == ("RX 7900 XT", 20, None)
    _, tp, _ = planner.plan_workload(w)
    assert tp.tokens_per_s_gpu is None and "no known bf16 peak for gfx1100 RX 7900 XT" in tp.notes[0]
    # this test's host has no GPU: the arch's first card
    assert planner.check(make_recipe(arch="gfx1100")).workload.product == "RX 7900 XTX"


def test_strix_halo_is_planned_with_the_memory_share_the_host_reports():
    """gfx1151's memory is the host's: the planner takes the share this host gives the GPU (its GTT limit here),
    not the table's 64 GB, and never suggests CPU offload (unified memory)."""
    gib = 1024 ** 3
    mine = (host.GPU(0, "gfx1151", device_id=0x1586, compute_units=40, vram_bytes=gib // 2, gtt_bytes=110 * gib),)
    w, _ = workload.from_recipe(make_recipe(arch="gfx1151", model_name_or_path="Qwen/Qwen3-8B"), gpus=mine)
    assert (w.product, w.capacity_gib, w.unified_memory) == ("Radeon 8060S", 110.0, True)
    assert "its memory share 110.0 GiB as this host reports it" in w.product_source
    elsewhere, _ = workload.from_recipe(make_recipe(arch="gfx1151", model_name_or_path="Qwen/Qwen3-8B"), gpus=())
    assert elsewhere.capacity_gib == 64
    big = planner.check(make_recipe(arch="gfx1151", model_name_or_path="Qwen/Qwen3-32B", finetuning_type="full"))
    assert big.verdict == "does not fit" and not [s for s in big.suggestions if "offload" in s.line()]
