"""`make doctor`'s interconnect checks: the IOMMU setting multi-GPU peer traffic needs, and whether each pair of GPUs
of one arch reaches the other directly (xGMI, PCIe peer-to-peer) as the kernel lists it."""

from __future__ import annotations

from typing import Any, Mapping

from ..hardware.host import HostFacts
from .report import Finding, size


def iommu_findings(host: HostFacts) -> list[Finding]:
    if len(host.gpus) < 2:
        return []
    args = host.kernel_cmdline.split()
    if "iommu=pt" in args:
        return [Finding("ok", "iommu=pt on the kernel command line (multi-GPU peer-to-peer at full speed)")]
    if not host.iommu_active or "amd_iommu=off" in args or "intel_iommu=off" in args:
        return [Finding("ok", "IOMMU off: no pass-through setting needed")]
    return [Finding("warn", f"{len(host.gpus)} GPUs and the IOMMU translates DMA: without iommu=pt, GPU peer-to-peer "
                    "traffic is slow or hangs (AMD's multi-GPU guidance)",
                    "add iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub, `sudo update-grub`, reboot")]


# RCCL's docs, "Enabling peer-to-peer transport" (github.com/ROCm/rccl README, docs/how-to/rccl-usage-tips.rst):
# PCIe-connected GPUs need HSA_FORCE_FINE_GRAIN_PCIE=1, GPUs that support peer-to-peer, and large BAR addressing.
P2P_ENV = "HSA_FORCE_FINE_GRAIN_PCIE=1"
# Without peer access RCCL's P2P transport can fail or hang (two RX 7900 XTX under LLaMA-Factory:
# hiyouga/LlamaFactory#6271); NCCL_P2P_DISABLE=1 (NCCL's name, which RCCL reads) stages through host memory instead.
P2P_FALLBACK = ('train anyway through host memory: SET="env.NCCL_P2P_DISABLE=1" (RCCL copies via shared memory; '
                "slower all-reduces, which a LoRA's small gradients barely feel; hiyouga/LlamaFactory#6271)")


def peer_to_peer(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """Whether each pair of GPUs reaches the other directly, as the kernel (KFD) lists it, and what to do if not.
    Only on a host with several GPUs of one arch (what one data-parallel run uses)."""
    out: list[Finding] = []
    by_arch: dict[str, list] = {}
    for g in host.gpus:
        by_arch.setdefault(g.gfx, []).append(g)
    for gfx, gpus in by_arch.items():
        if len(gpus) < 2 or any(g.node is None for g in gpus):
            continue
        family = getattr(arches.get(gfx), "family", "")
        names = ", ".join(f"GPU {g.index}" for g in gpus)
        small_bar = [g for g in gpus if g.vram_bytes and g.visible_vram_bytes is not None
                     and g.visible_vram_bytes < g.vram_bytes]
        bar_fix = "; ".join(f"GPU {g.index} exposes {size(g.visible_vram_bytes)} of its {size(g.vram_bytes)} VRAM on the "
                            "PCIe bus: enable Resizable BAR and Above 4G Decoding in the BIOS" for g in small_bar)
        if any(g.peers is None for g in gpus):
            out.append(Finding("info", f"{names} ({gfx}): this kernel lists no peer-to-peer links "
                               "(/sys/class/kfd/kfd/topology/nodes/*/p2p_links: Linux 6.0+), so whether they reach "
                               "each other directly cannot be told" + (f"; {bar_fix}" if bar_fix else ""),
                               f"if a multi-GPU run hangs at its first all-reduce, {P2P_FALLBACK}"))
            continue
        missing = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:]
                   if b.node not in (a.peers or ()) or a.node not in (b.peers or ())]
        if missing:
            pairs = ", ".join(f"GPU {a.index} <-> GPU {b.index}" for a, b in missing)
            why = bar_fix or ("the kernel finds no PCIe peer path: a kernel without HSA_AMD_P2P, a BIOS/PCIe switch "
                              "(ACS) that blocks peer traffic, or cards behind different root complexes")
            out.append(Finding("warn", f"{pairs} ({gfx}): no peer-to-peer link (KFD's p2p_links list none); {why}",
                               P2P_FALLBACK))
            continue
        xgmi = all(b.node in a.xgmi_peers for i, a in enumerate(gpus) for b in gpus[i + 1:])
        if xgmi:
            out.append(Finding("ok", f"{names} ({gfx}) reach each other over xGMI (KFD io_links)"))
        else:
            line = f"{names} ({gfx}) reach each other peer-to-peer over PCIe (KFD's p2p_links)"
            if family.startswith("rdna") or family.startswith("cdna"):
                line += (f"; RCCL uses it only with {P2P_ENV} in the run's env (RCCL's docs; "
                         "qwen2.5-7b-lora-2x7900xtx sets it, or SET=\"env.HSA_FORCE_FINE_GRAIN_PCIE=1\")")
            out.append(Finding("ok", line))
    return out
