"""`make doctor` as data: host facts parsed from a fake sysfs and from rocminfo/amd-smi text, then the
findings for an 8x MI300X node, a misconfigured workstation and a machine without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmft import doctor
from rocmft.doctor import DockerFacts
from rocmft.hardware import arches, host
from rocmft.hardware.host import GPU, HostFacts

A = arches.table()
ROOT = Path(__file__).resolve().parents[3]
GiB = 1024 ** 3


@pytest.mark.parametrize("version,gfx", [(90402, "gfx942"), (90010, "gfx90a"), (110000, "gfx1100"), (110001, "gfx1101"),
                                         (120001, "gfx1201"), (100300, "gfx1030"), (90500, "gfx950"), (0, "")])
def test_gfx_from_kfd_target_version(version, gfx):
    assert host.gfx_from_target_version(version) == gfx


def write_node(base: Path, n: int, **props):
    node = base / str(n)
    node.mkdir(parents=True)
    (node / "properties").write_text("".join(f"{k} {v}\n" for k, v in props.items()))


def test_gpus_from_sysfs_in_rocr_order(tmp_path):
    topo = tmp_path / "nodes"
    write_node(topo, 0, cpu_cores_count=96, simd_count=0, gfx_target_version=0, drm_render_minor=0)
    for i in range(2):
        write_node(topo, i + 1, cpu_cores_count=0, simd_count=1216, gfx_target_version=90402,
                   drm_render_minor=128 + 8 * i, location_id=(0x0c + i) << 8, domain=0)
    write_node(topo, 10, cpu_cores_count=0, simd_count=1216, gfx_target_version=90402, drm_render_minor=200)
    gpus = host.gpus_from_sysfs(topo)
    assert [(g.index, g.gfx, g.render_node, g.pci) for g in gpus] == [
        (0, "gfx942", "/dev/dri/renderD128", "0000:0c:00.0"),
        (1, "gfx942", "/dev/dri/renderD136", "0000:0d:00.0"),
        (2, "gfx942", "/dev/dri/renderD200", ""),  # node 10 sorts after 2 (numeric order, as ROCr)
    ]
    assert host.gpus_from_sysfs(tmp_path / "missing") == []


ROCMINFO = """ROCk module version 6.8.5 is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.14
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Uuid:                    GPU-1b2c
  Marketing Name:          AMD Instinct MI300X
  Vendor Name:             AMD
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
*******
Agent 3
*******
  Name:                    gfx1100
  Marketing Name:          Radeon RX 7900 XTX
  Device Type:             GPU
*** Done ***
"""


def test_gpus_from_rocminfo():
    gpus = host.gpus_from_rocminfo(ROCMINFO)
    assert [(g.index, g.gfx, g.name) for g in gpus] == [(0, "gfx942", "AMD Instinct MI300X"), (1, "gfx1100", "Radeon RX 7900 XTX")]


def test_gpus_from_amd_smi_and_merge():
    text = json.dumps([{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "target_graphics_version": "gfx942"}},
                       {"gpu": 1, "asic": {"market_name": "AMD Instinct MI300X", "target_graphics_version": "gfx942"}}])
    named = host.gpus_from_amd_smi(text)
    assert [(g.index, g.gfx) for g in named] == [(0, "gfx942"), (1, "gfx942")]
    assert host.gpus_from_amd_smi("not json") == []
    sysfs = [GPU(0, "gfx942", render_node="/dev/dri/renderD128"), GPU(1, "gfx942", render_node="/dev/dri/renderD136")]
    merged = host.merge_gpus(sysfs, named)
    assert [(g.name, g.render_node) for g in merged] == [("AMD Instinct MI300X", "/dev/dri/renderD128"),
                                                         ("AMD Instinct MI300X", "/dev/dri/renderD136")]
    assert host.merge_gpus([], named) == named and host.merge_gpus(sysfs, named[:1]) == sysfs


def node(n=8, **kw) -> HostFacts:
    gpus = tuple(GPU(i, "gfx942", "AMD Instinct MI300X", f"/dev/dri/renderD{128 + i}") for i in range(n))
    devices = ("/dev/kfd", *(g.render_node for g in gpus))
    base = dict(uid=1000, gid=1000, user="alice", project_root="/p", hf_home="/data/hf", hostname="mi300x",
                groups=(1000, 44, 109), video_gid=44, render_gid=109, devices=devices, accessible=devices, gpus=gpus,
                gpu_source="sysfs", tools={"rocminfo": "/opt/rocm/bin/rocminfo"}, shm_bytes=512 * GiB,
                disk_free={"/p": 2000 * GiB}, kernel_cmdline="BOOT_IMAGE=/vmlinuz ro iommu=pt", iommu_active=True,
                numa_balancing=0, amdgpu_version="6.16.6")
    base.update(kw)
    return HostFacts(**base)


NO_GPU = HostFacts(uid=1000, gid=1000, user="carol", project_root="/p", hf_home="/p/.cache/hf", shm_bytes=8 * GiB,
                   disk_free={"/p": 50 * GiB}, video_gid=44)
DOCKER_OK = DockerFacts(configured=True, reachable=True, where="unix:///var/run/docker.sock", version="27.1",
                        root_dir="/var/lib/docker", root_free=500 * GiB, images={"gfx942": "rocmft:gfx942 (sha256:ab)"})
NO_DOCKER = DockerFacts(configured=False, reachable=False, where="unix:///var/run/docker.sock")


def levels(report) -> dict[str, str]:
    return {f.what: f.level for f in report.findings}


def test_doctor_healthy_mi300x_node():
    report = doctor.check(node(), DOCKER_OK, A)
    assert not report.failed and report.suggested_arch == "gfx942" and not report.no_gpu
    assert all(f.level in ("ok", "info") for f in report.findings), report.findings
    text = "\n".join(doctor.render(report))
    assert "8 x gfx942" in text and "Suggested: ARCH=gfx942" in text and "image for ARCH=gfx942: rocmft:gfx942" in text
    assert "GPU 7: gfx942 AMD Instinct MI300X (/dev/dri/renderD135)" in text
    assert "iommu=pt on the kernel command line" in text


def test_doctor_names_the_product_from_kfd_and_the_figures_the_planner_uses(tmp_path):
    # A 4-APU MI300A node as sysfs shows it, no rocminfo: the product comes from KFD's PCI device id (74A0,
    # libdrm data/amdgpu.ids) and CU count (228 = simd_count / simd_per_cu).
    topo = tmp_path / "nodes"
    write_node(topo, 0, cpu_cores_count=96, simd_count=0, gfx_target_version=0)
    for i in range(4):
        write_node(topo, i + 1, simd_count=912, simd_per_cu=4, gfx_target_version=90402, device_id=0x74A0,
                   drm_render_minor=128 + i)
    gpus = tuple(host.gpus_from_sysfs(topo))
    assert [(g.device_id, g.compute_units) for g in gpus] == [(0x74A0, 228)] * 4
    report = doctor.check(node(gpus=gpus, tools={}), DOCKER_OK, A)
    text = "\n".join(doctor.render(report))
    assert "GPU 0: gfx942 MI300A (/dev/dri/renderD128)" in text
    assert "gfx942 is MI300A: `make plan` uses its figures (128 GB, 980.6 bf16 TFLOP/s, 4 per node)" in text
    unknown = tuple(GPU(i, "gfx942", render_node=f"/dev/dri/renderD{128 + i}", device_id=0x74A2) for i in range(2))
    findings = levels(doctor.check(node(gpus=unknown, tools={}), DOCKER_OK, A))
    assert findings["gfx942 GPUs (0x74a2) are not a product docker/arches.yaml knows: `make plan` uses MI300X's figures"] == "warn"


def test_doctor_no_gpu_says_so_plainly_and_points_to_demo():
    report = doctor.check(NO_GPU, NO_DOCKER, A)
    assert report.no_gpu and not report.failed and report.suggested_arch is None
    text = "\n".join(doctor.render(report))
    assert "No AMD GPU on this machine" in text and "make demo" in text
    assert "FAIL" not in text
    assert "/dev/kfd present" not in text  # no device checks to fail on a machine without a GPU


def test_doctor_each_failure_has_its_fix():
    host_facts = node(groups=(1000,), accessible=(), kernel_cmdline="ro quiet", shm_bytes=1 * GiB,
                      disk_free={"/p": 20 * GiB})
    docker_facts = DockerFacts(configured=True, reachable=False, where="unix:///var/run/docker.sock",
                               error="Error while fetching server API version: ('Connection aborted.', PermissionError(13, 'Permission denied'))")
    report = doctor.check(host_facts, docker_facts, A)
    assert report.failed
    by_what = {f.what: f for f in report.findings}
    kfd = by_what["/dev/kfd is not readable and writable by alice"]
    assert kfd.level == "fail" and "usermod -aG video,render alice" in kfd.fix
    render = next(f for f in report.findings if "not in `render`" in f.what)
    assert render.level == "warn" and "usermod" in render.fix
    iommu = next(f for f in report.findings if "iommu=pt" in f.fix)
    assert iommu.level == "warn" and "GRUB_CMDLINE_LINUX" in iommu.fix
    shm = next(f for f in report.findings if "/dev/shm" in f.what)
    assert shm.level == "warn" and "remount" in shm.fix
    daemon = next(f for f in report.findings if "Docker daemon" in f.what)
    assert daemon.level == "fail" and "`docker` group" in daemon.fix
    disk = next(f for f in report.findings if "checkpoints" in f.what)
    assert disk.level == "warn"
    for f in report.findings:
        if f.level in ("fail", "warn"):
            assert f.fix, f"no fix for: {f.what}"


def test_doctor_missing_image_and_arch_mismatch():
    facts = node(n=1, gpus=(GPU(0, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD128"),))
    report = doctor.check(facts, DOCKER_OK, A, arch="gfx942")
    whats = {f.what: f for f in report.findings}
    assert whats["ARCH=gfx942 but this host's GPUs are gfx1100"].fix == "ARCH=gfx1100"
    report = doctor.check(facts, DOCKER_OK, A)
    missing = next(f for f in report.findings if f.what == "no image for ARCH=gfx1100")
    assert missing.level == "fail" and missing.fix == "`make image ARCH=gfx1100`"
    assert report.suggested_arch == "gfx1100"
    # one GPU: no IOMMU advice
    assert not any("iommu" in f.what.lower() for f in report.findings)


def test_doctor_driver_without_gpus_and_unknown_arch():
    report = doctor.check(node(gpus=(), devices=("/dev/kfd",), accessible=("/dev/kfd",)), DOCKER_OK, A)
    assert any(f.level == "fail" and "no GPU is listed" in f.what for f in report.findings)
    odd = node(n=1, gpus=(GPU(0, "gfx90c", "", "/dev/dri/renderD128"),))
    report = doctor.check(odd, DOCKER_OK, A)
    assert any(f.level == "warn" and "gfx90c is not in docker/arches.yaml" in f.what for f in report.findings)


def test_gather_reads_this_machine():
    """Each fact against this machine read another way (the kernel's own files, the standard library)."""
    import pwd
    import socket

    facts = host.gather(tools=False)
    assert (facts.uid, facts.gid, facts.user) == (os.getuid(), os.getgid(), pwd.getpwuid(os.getuid()).pw_name)
    assert facts.project_root == str(ROOT) and facts.hostname == socket.gethostname()
    assert set(facts.groups) == {os.getgid(), *os.getgroups()}
    shm = os.statvfs("/dev/shm")
    assert facts.shm_bytes == shm.f_blocks * shm.f_frsize
    assert facts.kernel_cmdline == Path("/proc/cmdline").read_text().strip()
    # GPUs: what KFD lists (nodes with SIMDs); none on a machine without the amdgpu driver, as here in CI
    kfd = Path("/sys/class/kfd/kfd/topology/nodes")
    simd_nodes = [n for n in kfd.glob("*/properties") if "\nsimd_count 0\n" not in "\n" + n.read_text()] \
        if kfd.is_dir() else []
    assert len(facts.gpus) == len(simd_nodes) and facts.has_gpu == bool(simd_nodes)
    assert ("/dev/kfd" in facts.devices) == os.path.exists("/dev/kfd")
    json.dumps(facts.to_dict())  # plain data


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this host has an AMD GPU driver")
def test_make_doctor_on_a_machine_without_gpu():
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"  # a configured but absent daemon: a warning here
    out = subprocess.run([sys.executable, "-m", "rocmft.cli.main", "doctor"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No AMD GPU on this machine" in out.stdout and "make demo" in out.stdout
    assert "Docker daemon not reachable" in out.stdout



def test_doctor_points_at_the_numerics_canary():
    """The doctor checks devices, not arithmetic: it says where the arithmetic is checked."""
    for facts in (node(), NO_GPU):
        text = "\n".join(doctor.render(doctor.check(facts, DOCKER_OK, A)))
        assert "make canary RECIPE=" in text and "make train CANARY=1" in text


# ---- peer-to-peer between cards, from a fake KFD topology and amdgpu's VRAM/BAR sizes

def write_link(base: Path, node: int, kind: str, n: int, **props):
    link = base / str(node) / kind / str(n)
    link.mkdir(parents=True)
    (link / "properties").write_text("".join(f"{k} {v}\n" for k, v in props.items()))


def radeon_pair(tmp_path, *, p2p: bool, listed: bool = True, visible=24 * GiB, arch_version=110000):
    """Two RX 7900 XTX (KFD nodes 1 and 2) on PCIe, as amdgpu and KFD show them."""
    topo, pci = tmp_path / "nodes", tmp_path / "pci"
    write_node(topo, 0, cpu_cores_count=16, simd_count=0, gfx_target_version=0)
    for i, node_id in enumerate((1, 2)):
        write_node(topo, node_id, simd_count=192, simd_per_cu=2, gfx_target_version=arch_version, device_id=0x744C,
                   drm_render_minor=128 + i, location_id=(0x03 + i) << 8, domain=0)
        other = 2 if node_id == 1 else 1
        write_link(topo, node_id, "io_links", 0, type=2, node_from=node_id, node_to=0, weight=20)  # PCIe to the CPU
        if listed:
            (topo / str(node_id) / "p2p_links").mkdir()
            if p2p:
                write_link(topo, node_id, "p2p_links", 0, type=2, node_from=node_id, node_to=other, weight=40)
        dev = pci / f"0000:{0x03 + i:02x}:00.0"
        dev.mkdir(parents=True)
        (dev / "mem_info_vram_total").write_text(f"{24 * GiB}\n")
        (dev / "mem_info_vis_vram_total").write_text(f"{visible}\n")
    return tuple(host.gpus_from_sysfs(topo, pci_devices=pci))


def p2p_findings(gpus):
    return [f for f in doctor.check(node(gpus=gpus, tools={}), DOCKER_OK, A).findings if f.what.startswith("GPU ")]


def test_two_radeons_that_reach_each_other(tmp_path):
    gpus = radeon_pair(tmp_path, p2p=True)
    assert [(g.node, g.peers, g.vram_bytes, g.visible_vram_bytes) for g in gpus] == [
        (1, (2,), 24 * GiB, 24 * GiB), (2, (1,), 24 * GiB, 24 * GiB)]
    [found] = p2p_findings(gpus)
    assert found.level == "ok" and "GPU 0, GPU 1 (gfx1100) reach each other peer-to-peer over PCIe" in found.what
    assert "HSA_FORCE_FINE_GRAIN_PCIE=1" in found.what  # RCCL needs it to use the path


def test_two_radeons_behind_a_small_bar_cannot_and_doctor_says_what_to_do(tmp_path):
    gpus = radeon_pair(tmp_path, p2p=False, visible=256 * 1024 ** 2)
    [found] = p2p_findings(gpus)
    assert found.level == "warn"
    assert found.what.startswith("GPU 0 <-> GPU 1 (gfx1100): no peer-to-peer link (KFD's p2p_links list none)")
    assert "GPU 0 exposes 0.2 GiB of its 24.0 GiB VRAM on the PCIe bus: enable Resizable BAR" in found.what
    assert 'SET="env.NCCL_P2P_DISABLE=1"' in found.fix and "LlamaFactory#6271" in found.fix
    # large BAR but still no link: the kernel's other reasons, the same fallback
    [other] = p2p_findings(radeon_pair(tmp_path / "b", p2p=False))
    assert other.level == "warn" and "HSA_AMD_P2P" in other.what and "NCCL_P2P_DISABLE=1" in other.fix


def test_a_kernel_that_lists_no_p2p_links_cannot_tell(tmp_path):
    gpus = radeon_pair(tmp_path, p2p=False, listed=False)
    assert all(g.peers is None for g in gpus)
    [found] = p2p_findings(gpus)
    assert found.level == "info" and "cannot be told" in found.what and "NCCL_P2P_DISABLE=1" in found.fix


def test_mi300x_pair_on_xgmi_and_a_single_card_has_no_p2p_line(tmp_path):
    topo = tmp_path / "nodes"
    write_node(topo, 0, cpu_cores_count=96, simd_count=0, gfx_target_version=0)
    for n in (1, 2):
        write_node(topo, n, simd_count=1216, simd_per_cu=4, gfx_target_version=90402, device_id=0x74A1,
                   drm_render_minor=127 + n)
        write_link(topo, n, "io_links", 0, type=11, node_from=n, node_to=3 - n, weight=15)  # xGMI
        (topo / str(n) / "p2p_links").mkdir()  # KFD lists no PCIe p2p link within an xGMI hive
    gpus = tuple(host.gpus_from_sysfs(topo, pci_devices=tmp_path / "no-pci"))
    [found] = p2p_findings(gpus)
    assert found.level == "ok" and "over xGMI" in found.what
    assert p2p_findings(gpus[:1]) == []


def test_a_host_with_an_igpu_never_suggests_its_arch():
    """An RX 7900 XTX with the Ryzen iGPU (gfx1036, not in docker/arches.yaml) listed first: the suggested
    arch is the table's gfx1100; no line says ARCH=gfx1036."""
    facts = HostFacts(uid=1000, gid=1000, user="bob", project_root="/p", hf_home="/h", devices=("/dev/kfd",),
                      accessible=("/dev/kfd",),
                      gpus=(GPU(0, "gfx1036", render_node="/dev/dri/renderD128"),
                            GPU(1, "gfx1100", render_node="/dev/dri/renderD129")), gpu_source="sysfs")
    report = doctor.check(facts, DockerFacts(configured=False, reachable=False), arches.table())
    assert report.suggested_arch == "gfx1100"
    text = "\n".join(doctor.render(report))
    assert "ARCH=gfx1036" not in text and "gfx1036 is not in docker/arches.yaml" in text


# ---- host tuning (issue 31): NUMA auto-balancing, the amdgpu driver, an enabled iGPU; facts read from fake trees

def test_numa_balancing_and_driver_version_read_from_fake_proc_and_sys(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/numa_balancing").write_text("1\n")
    (tmp_path / "sys/module/amdgpu").mkdir(parents=True)
    (tmp_path / "sys/module/amdgpu/version").write_text("6.16.6\n")
    assert host.numa_balancing(tmp_path / "proc") == 1 and host.amdgpu_version(tmp_path / "sys") == "6.16.6"
    assert host.numa_balancing(tmp_path / "nothing") is None and host.amdgpu_version(tmp_path / "nothing") == ""


def test_physical_cores_counts_smt_siblings_once(tmp_path):
    for cpu, (package, core) in enumerate([(0, 0), (0, 1), (0, 0), (0, 1), (1, 0), (1, 0)]):
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core}\n")
    (tmp_path / "cpufreq").mkdir()  # not a CPU
    assert host.physical_cores(tmp_path) == 3
    assert host.physical_cores(tmp_path / "missing") == (os.cpu_count() or 1)


def test_doctor_numa_balancing_on_a_multi_gpu_instinct_host_warns_with_its_fix():
    report = doctor.check(node(numa_balancing=1, amdgpu_version="6.16.6"), DOCKER_OK, A)
    warn = [f for f in report.findings if "NUMA auto-balancing is on" in f.what]
    assert len(warn) == 1 and warn[0].level == "warn" and "sysctl kernel.numa_balancing=0" in warn[0].fix
    assert any(w.startswith("NUMA auto-balancing off") for w in levels(doctor.check(node(numa_balancing=0), DOCKER_OK, A)))
    # One GPU, or Radeon cards: AMD's guidance is for multi-GPU Instinct hosts.
    assert not [f for f in doctor.check(node(1, numa_balancing=1), DOCKER_OK, A).findings if "NUMA" in f.what]
    radeon = tuple(GPU(i, "gfx1100", "Radeon RX 7900 XTX", f"/dev/dri/renderD{128 + i}") for i in range(2))
    assert not [f for f in doctor.check(node(gpus=radeon, numa_balancing=1), DOCKER_OK, A).findings if "NUMA" in f.what]


def test_doctor_driver_version_beside_the_images_rocm():
    found = [f for f in doctor.check(node(amdgpu_version="6.16.6"), DOCKER_OK, A).findings if "amdgpu" in f.what]
    assert found[0].level == "info" and "6.16.6" in found[0].what and f"ROCm {A['gfx942'].rocm}" in found[0].what
    inbox = [f for f in doctor.check(node(amdgpu_version=""), DOCKER_OK, A).findings if "inbox driver" in f.what]
    assert inbox[0].level == "warn" and "amdgpu-install --usecase=dkms" in inbox[0].fix
    radeon = (GPU(0, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD128"),)
    devices = ("/dev/kfd", "/dev/dri/renderD128")
    inbox = [f for f in doctor.check(node(gpus=radeon, devices=devices, accessible=devices, amdgpu_version=""),
                                     DOCKER_OK, A).findings if "inbox driver" in f.what]
    assert inbox[0].level == "info"


def test_doctor_an_enabled_igpu_beside_radeon_cards_warns_with_the_gpus_to_keep():
    gpus = (GPU(0, "gfx1036", "AMD Radeon Graphics", "/dev/dri/renderD128"),
            GPU(1, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD129"),
            GPU(2, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD130"))
    devices = ("/dev/kfd", *(g.render_node for g in gpus))
    report = doctor.check(node(gpus=gpus, devices=devices, accessible=devices), DOCKER_OK, A)
    warn = [f for f in report.findings if "integrated GPU" in f.what]
    assert len(warn) == 1 and "GPU 0 (gfx1036, /dev/dri/renderD128)" in warn[0].what
    assert "GPUS=1,2" in warn[0].fix and "BIOS" in warn[0].fix
    assert not [f for f in doctor.check(node(), DOCKER_OK, A).findings if "integrated GPU" in f.what]


def strix_halo(tmp_path, *, vram=512 * 1024 ** 2, gtt=96 * GiB):
    """A Ryzen AI Max+ 395 as amdgpu and KFD show it: one gfx1151 node (device 1586, 40 CUs), its carve-out and
    GTT limit in sysfs (mem_info_vram_total, mem_info_gtt_total)."""
    topo, pci = tmp_path / "nodes", tmp_path / "pci"
    write_node(topo, 0, cpu_cores_count=32, simd_count=0, gfx_target_version=0)
    write_node(topo, 1, simd_count=80, simd_per_cu=2, gfx_target_version=110501, device_id=0x1586,
               drm_render_minor=128, location_id=0xc5 << 8, domain=0)
    dev = pci / "0000:c5:00.0"
    dev.mkdir(parents=True)
    if vram is not None:
        (dev / "mem_info_vram_total").write_text(f"{vram}\n")
    if gtt is not None:
        (dev / "mem_info_gtt_total").write_text(f"{gtt}\n")
    return tuple(host.gpus_from_sysfs(topo, pci_devices=pci))


def test_strix_halo_is_an_integrated_training_target_with_its_memory_share(tmp_path):
    gpus = strix_halo(tmp_path)
    assert [(g.gfx, g.compute_units, g.vram_bytes, g.gtt_bytes, g.memory_share) for g in gpus] == [
        ("gfx1151", 40, 512 * 1024 ** 2, 96 * GiB, 96 * GiB)]
    devices = ("/dev/kfd", "/dev/dri/renderD128")
    report = doctor.check(node(gpus=gpus, devices=devices, accessible=devices), DOCKER_OK, A)
    assert report.suggested_arch == "gfx1151" and report.gpus[0].startswith("GPU 0: gfx1151 Radeon 8060S integrated")
    share = [f for f in report.findings if "integrated GPU (Strix Halo)" in f.what]
    assert len(share) == 1 and share[0].level == "ok"
    assert "carve-out 0.5 GiB (firmware: UMA frame buffer), GTT 96.0 GiB (the kernel's limit); `make plan` uses 96.0 GiB" \
        in share[0].what and "ttm.pages_limit" in share[0].fix
    assert not [f for f in report.findings if "Integrated Graphics: Disabled" in f.fix]  # never told to hide it
    unread = doctor.check(node(gpus=strix_halo(tmp_path / "b", vram=None, gtt=None), devices=devices,
                               accessible=devices), DOCKER_OK, A)
    [warn] = [f for f in unread.findings if "memory share cannot be read" in f.what]
    assert warn.level == "warn" and "64 GB from docker/arches.yaml" in warn.what


def test_strix_halo_beside_a_discrete_card_is_a_target_not_a_gpu_to_hide():
    gpus = (GPU(0, "gfx1151", "AMD Radeon 8060S Graphics", "/dev/dri/renderD128"),
            GPU(1, "gfx1100", "Radeon RX 7900 XTX", "/dev/dri/renderD129"))
    devices = ("/dev/kfd", *(g.render_node for g in gpus))
    report = doctor.check(node(gpus=gpus, devices=devices, accessible=devices), DOCKER_OK, A)
    [found] = [f for f in report.findings if "Strix Halo), beside" in f.what]
    assert found.level == "info" and "ARCH=gfx1151" in found.fix and "ARCH=gfx1100" in found.fix
    assert not [f for f in report.findings if "BIOS/UEFI" in f.fix]
