"""The arch table's corrected values, each pinned with the source that decides it (issue 15)."""

from __future__ import annotations

import pytest

from rocmft.hardware import arches
from rocmft.launch import plan as launch_plan

TABLE = arches.table()


def test_triton_flash_attn_arches_enable_it_at_run_time():
    # flash-attn 2.8.3 flash_attn/flash_attn_interface.py:
    #   USE_TRITON_ROCM = os.getenv("FLASH_ATTENTION_TRITON_AMD_ENABLE", "FALSE") == "TRUE"  (read at import)
    # https://github.com/Dao-AILab/flash-attention/blob/v2.8.3/flash_attn/flash_attn_interface.py
    for name, arch in TABLE.items():
        want = "TRUE" if arch.flash_attn == "triton" else None
        assert arch.env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE") == want, name
    # gfx1200 too: flash-attn 2.8.3's flash_attn_triton_amd/utils.py is_rdna() names it; gfx1151 it does not
    assert {n for n, a in TABLE.items() if a.flash_attn == "triton"} == {"gfx1100", "gfx1101", "gfx1200", "gfx1201"}


def test_aotriton_experimental_only_where_aotriton_says_so():
    # PyTorch sdp_utils.cpp asks aotriton::isArchExperimentallySupported(), which returns true for
    # gfx950, gfx1151 and gfx1201 only (ROCm/aotriton v2src util.cc); elsewhere the variable does nothing.
    have = {n for n, a in TABLE.items() if a.env.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL") == "1"}
    assert have == {"gfx950", "gfx1151", "gfx1201"}


def test_rx_9070_xt_peak_is_the_derived_figure():
    # Derived, not published (the old 194.7 was labelled AMD spec and rounded wrong): 64 CUs x 2.97 GHz x 1024 dense bf16 FLOP/clock/CU (the table says so).
    assert round(64 * 2.97e9 * 1024 / 1e12, 1) == TABLE["gfx1201"].peak("bf16") == 194.6


def test_min_nchannels_only_on_a_full_single_mi300x_node():
    # AMD's RCCL guidance: NCCL_MIN_NCHANNELS=112 for one 8-GPU MI300X node; its multi-node validation uses 40.
    gfx942 = TABLE["gfx942"]
    assert "NCCL_MIN_NCHANNELS" not in gfx942.env
    assert dict(gfx942.full_node_env) == {"NCCL_MIN_NCHANNELS": "112"}
    full, _, _ = launch_plan._environment(gfx942, {}, None, 1, 8)
    partial, _, _ = launch_plan._environment(gfx942, {}, None, 1, 4)
    multi, _, _ = launch_plan._environment(gfx942, {}, None, 2, 8)
    assert full["NCCL_MIN_NCHANNELS"] == "112"
    assert "NCCL_MIN_NCHANNELS" not in partial and "NCCL_MIN_NCHANNELS" not in multi
    # ROCm's default since 6.2; kept explicit for older bases (the table says so beside it).
    assert full["HIP_FORCE_DEV_KERNARG"] == "1"


def test_each_arch_figures_are_its_first_product():
    # The arch-level figures serve a host whose product is not recognised: they must be the first product's.
    for name, arch in TABLE.items():
        assert set(arch.product_table) <= set(arch.products), name
        if arch.products:
            assert arch.product == arch.products[0], name
            assert arch.for_product(arch.product) == arch, name


@pytest.mark.parametrize("arch,product,cus,ghz,per_cu,peak", [
    # BF16 dense = CUs x peak engine clock x BF16 FLOPs/clock/CU. FLOPs/clock/CU and clocks: AMD's
    # microarchitecture pages (docs conceptual/gpu-arch/mi300.md: 2048 at 2.1 GHz; mi250.md: 1024 at 1.7 GHz);
    # CDNA4 4096, MI355X 2.4 GHz / MI350X 2.2 GHz (AMD at Hot Chips 2025). CUs: AMD's GPU specifications table.
    ("gfx942", "MI300X", 304, 2.1, 2048, 1307.4),
    ("gfx942", "MI325X", 304, 2.1, 2048, 1307.4),
    ("gfx942", "MI300A", 228, 2.1, 2048, 980.6),
    ("gfx950", "MI355X", 256, 2.4, 4096, 2516.6),
    ("gfx950", "MI350X", 256, 2.2, 4096, 2306.9),
    ("gfx90a", "MI250X", 110, 1.7, 1024, 191.5),  # per GCD: ROCr shows each GCD as one GPU
    ("gfx90a", "MI250", 104, 1.7, 1024, 181.0),
    ("gfx90a", "MI210", 104, 1.7, 1024, 181.0),
])
def test_product_peaks_follow_from_cus_and_clock(arch, product, cus, ghz, per_cu, peak):
    figures = TABLE[arch].for_product(product)
    assert round(cus * ghz * 1e9 * per_cu / 1e12, 1) == figures.peak("bf16") == figures.peak("fp16") == peak
    assert figures.peak("fp32") == round(cus * ghz * 1e9 * 256 / 1e12, 1)  # matrix FP32: 256 FLOPs/clock/CU
    assert TABLE[arch].product_table[product].compute_units == cus


@pytest.mark.parametrize("arch,product,memory,per_node,unified", [
    ("gfx942", "MI300X", 192, 8, False),
    ("gfx942", "MI325X", 256, 8, False),  # HBM3E; AMD GPU specifications table: 256 GiB
    ("gfx942", "MI300A", 128, 4, True),   # 128 GB HBM3 shared with 24 Zen 4 cores; 4 APUs per node
    ("gfx950", "MI350X", 288, 8, False),
    ("gfx90a", "MI250", 64, 8, False),    # 128 GB per card, 64 per GCD
    ("gfx90a", "MI210", 64, 8, False),
])
def test_product_memory_and_node_size(arch, product, memory, per_node, unified):
    figures = TABLE[arch].for_product(product)
    assert (figures.gpu_memory_gb, figures.gpus_per_node, figures.unified_memory) == (memory, per_node, unified)


@pytest.mark.parametrize("arch,device_id,cus,product", [
    # PCI ids from libdrm's data/amdgpu.ids
    ("gfx942", 0x74A0, 228, "MI300A"), ("gfx942", 0x74A1, 304, "MI300X"), ("gfx942", 0x74B5, 304, "MI300X"),
    ("gfx942", 0x74A5, 304, "MI325X"), ("gfx950", 0x75A3, 256, "MI355X"), ("gfx950", 0x75A0, 256, "MI350X"),
    ("gfx90a", 0x7408, 110, "MI250X"), ("gfx90a", 0x740C, 110, "MI250X"), ("gfx90a", 0x740C, 104, "MI250"),
    ("gfx90a", 0x740F, 104, "MI210"),
    ("gfx90a", 0x740C, None, None),  # "MI250X / MI250" and no CU count: not guessed
    ("gfx942", 0x74A2, 80, None),    # MI308X: not in the table
])
def test_identify_by_device_id_then_cus(arch, device_id, cus, product):
    assert TABLE[arch].identify(device_id, cus) == product


def test_identify_by_marketing_name_when_no_device_id():
    assert TABLE["gfx942"].identify(None, None, "AMD Instinct MI300A") == "MI300A"
    assert TABLE["gfx942"].identify(None, None, "AMD Instinct MI300X VF") == "MI300X"
    assert TABLE["gfx942"].identify(None, None, "gfx942") is None


def test_a_typo_in_product_figures_is_refused():
    with pytest.raises(ValueError, match="gpu_memory"):
        arches._product("gfx942", "MI300A", {"gpu_memory": 128})


@pytest.mark.parametrize("arch,device_id,cus,name,product,memory,peak", [
    # amdgpu.ids: 744C is the RX 7900 XTX, XT and GRE (by revision); KFD gives no revision, the CUs (AMD's GPU
    # specifications table: 96, 84, 80) tell them apart. A card with fewer CUs has no published peak here.
    ("gfx1100", 0x744C, 96, "", "RX 7900 XTX", 24, 122.8),
    ("gfx1100", 0x744C, 84, "", "RX 7900 XT", 20, None),
    ("gfx1100", 0x744C, 80, "", "RX 7900 GRE", 16, None),
    ("gfx1100", 0x7448, 96, "", "Radeon PRO W7900", 48, 122.8),  # same 96 CUs as the XTX, 48 GB
    ("gfx1100", 0x745E, 70, "", "Radeon PRO W7800", 32, None),
    ("gfx1101", 0x747E, 54, "", "RX 7700 XT", 12, None),
    ("gfx1201", 0x7551, 64, "", "Radeon AI PRO R9700", 32, 194.6),
    ("gfx1100", None, None, "Radeon RX 7900 XTX", "RX 7900 XTX", 24, 122.8),  # rocminfo's name, no sysfs
    ("gfx1100", None, None, "AMD Radeon RX 7900 XT", "RX 7900 XT", 20, None),  # not taken for the XTX
])
def test_radeon_cards_by_device_id_cus_or_name(arch, device_id, cus, name, product, memory, peak):
    a = TABLE[arch]
    assert a.identify(device_id, cus, name) == product
    figures = a.for_product(product)
    assert (figures.gpu_memory_gb, figures.peak("bf16")) == (memory, peak)


def test_liger_kernel_on_every_rocm_arch_never_on_cpu():
    # The ROCm images ship liger-kernel (hardware/versions.py pins a release with the wave64 num_warps fix,
    # linkedin/Liger-Kernel#326); the CPU venv and image do not, so the planner never suggests it for `cpu`.
    assert {n for n, a in TABLE.items() if not a.liger_kernel} == {"cpu"}
    assert {n for n, a in TABLE.items() if "liger-kernel" not in a.image_packages} == {"cpu"}


def test_image_packages_carry_the_pinned_versions():
    from rocmft.hardware import versions
    lock = versions.read_pins(versions.lock_file())
    gfx942, cpu = TABLE["gfx942"].image_packages, TABLE["cpu"].image_packages
    assert gfx942["liger-kernel"] == versions.LIGER_KERNEL_VERSION
    assert gfx942["flash-attn"] == versions.FLASH_ATTN_VERSION
    assert gfx942["bitsandbytes"] == versions.BITSANDBYTES_VERSION
    assert gfx942["deepspeed"] == cpu["deepspeed"] == lock["deepspeed"]
    # the CPU venv has no GPU-only package (bitsandbytes runs on CPU: QLoRA in CI); gfx1030 has no flash-attn
    assert not {"liger-kernel", "flash-attn"} & set(cpu) and cpu["bitsandbytes"] == versions.BITSANDBYTES_VERSION
    assert "flash-attn" not in TABLE["gfx1030"].image_packages
    for name, arch in TABLE.items():
        assert ("flash-attn" in arch.image_packages) == (arch.flash_attn in ("ck", "triton")), name
        assert arch.bitsandbytes == ("bitsandbytes" in arch.image_packages), name


@pytest.mark.parametrize("packages, message", [
    ("{bitsandbytes: pypi}", "is not one of lock, versions.py"),
    ("{swanlab: versions.py}", "IMAGE_PINS has no `swanlab`"),
    ("{badam: lock}", "lock.txt has no `badam==` pin"),
    ("{flash-attn: null}", "flash_attn `ck` but packages lacks flash-attn"),
])
def test_a_bad_packages_entry_is_refused(tmp_path, packages, message):
    table = tmp_path / "arches.yaml"
    table.write_text(f"""
defaults: {{base_image: b, packages: {{deepspeed: lock, flash-attn: versions.py}}}}
arches:
  gfx942: {{family: cdna3, gpus_per_node: 8, bf16: true, flash_attn: ck, packages: {packages}}}
""")
    with pytest.raises(ValueError, match=message.replace("`", ".").replace("(", ".")):
        arches.table(table)


def test_an_arch_packages_entry_overrides_the_defaults(tmp_path):
    table = tmp_path / "arches.yaml"
    table.write_text("""
defaults: {base_image: b, packages: {deepspeed: lock, liger-kernel: versions.py}}
arches:
  a: {family: cdna3, gpus_per_node: 8, bf16: true, packages: {liger-kernel: null, bitsandbytes: versions.py}}
  b: {family: cdna3, gpus_per_node: 8, bf16: true}
""")
    got = arches.table(table)
    assert set(got["a"].image_packages) == {"deepspeed", "bitsandbytes"}
    assert set(got["b"].image_packages) == {"deepspeed", "liger-kernel"}


def test_a_base_image_digest_pins_the_base_it_is_written_beside(tmp_path):
    """`base_image_digest` (issue 43, L10) belongs to the base it is written beside: the ROCm arches take the
    default's, an arch naming its own base_image (cpu) never does."""
    import shutil

    import yaml

    from rocmft.io import paths

    raw = yaml.safe_load(paths.arches_file().read_text())
    raw["defaults"]["base_image_digest"] = "sha256:" + "a" * 64
    (tmp_path / "docker").mkdir()
    shutil.copytree(paths.arches_file().parents[1] / "requirements", tmp_path / "requirements")
    (tmp_path / "docker" / "arches.yaml").write_text(yaml.safe_dump(raw))
    pinned = arches.table(tmp_path / "docker" / "arches.yaml")
    assert pinned["gfx942"].base_image_digest == "sha256:" + "a" * 64 and pinned["cpu"].base_image_digest == ""
    assert TABLE["gfx942"].base_image_digest == ""  # the shipped table pins tags only (its comment says why)
