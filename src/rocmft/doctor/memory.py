"""`make doctor`'s memory checks: the shared memory containers use, NUMA auto-balancing on multi-GPU Instinct hosts,
and a Ryzen iGPU that ROCm lists beside the discrete GPUs."""

from __future__ import annotations

from typing import Any, Mapping

from ..hardware.host import HostFacts
from .devices import instinct
from .report import Finding, GiB, size

SHM_GPU = 16 * GiB  # containers share the host's /dev/shm (ipc=host): RCCL and dataloaders live there


def shm_findings(host: HostFacts, no_gpu: bool) -> list[Finding]:
    if host.shm_bytes is None:
        return []
    if no_gpu:
        return [Finding("ok", f"shared memory /dev/shm: {size(host.shm_bytes)} (CPU containers get a private 2 GB one)")]
    if host.shm_bytes < SHM_GPU:
        return [Finding("warn", f"shared memory /dev/shm is {size(host.shm_bytes)}; containers share it (ipc=host) with "
                        "RCCL and the dataloaders", f"raise it to >= {size(SHM_GPU)}: `sudo mount -o remount,size=64G "
                        "/dev/shm` (persist in /etc/fstab)")]
    return [Finding("ok", f"shared memory /dev/shm: {size(host.shm_bytes)}")]


# The integrated GPUs of AMD's Ryzen CPUs (LLVM AMDGPU processor table: Renoir/Cezanne, Rembrandt, Raphael/Granite
# Ridge, Phoenix/Hawk Point, Strix Point, Strix Halo, Krackan). MI300A (gfx942) is an APU too, but a training target.
INTEGRATED_GFX = ("gfx90c", "gfx1035", "gfx1036", "gfx1103", "gfx1150", "gfx1151", "gfx1152")


def numa_balancing_findings(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """AMD's MI300X system tuning: disable NUMA auto-balancing, whose page scans can stall GPU kernels until the
    balancing pass ends (the GPU looks hung). Only multi-GPU Instinct hosts: where AMD's guidance applies."""
    if len(host.gpus) < 2 or not instinct(host, arches) or host.numa_balancing is None:
        return []
    if host.numa_balancing == 0:
        return [Finding("ok", "NUMA auto-balancing off (/proc/sys/kernel/numa_balancing = 0)")]
    return [Finding("warn", f"NUMA auto-balancing is on (/proc/sys/kernel/numa_balancing = {host.numa_balancing}): "
                    "on a multi-GPU Instinct host the GPUs can stall until a balancing pass ends (AMD's MI300X "
                    "system tuning: disable it)",
                    "`sudo sysctl kernel.numa_balancing=0`; persist it: "
                    "`echo kernel.numa_balancing=0 | sudo tee /etc/sysctl.d/90-rocm.conf`")]


def _integrated_target(gfx: str, arches: Mapping[str, Any]) -> bool:
    """An integrated GPU the table trains on (Strix Halo, gfx1151), not one to hide."""
    return gfx in arches and bool(getattr(arches[gfx], "integrated", False))


def igpu_findings(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """An enabled Ryzen iGPU beside discrete GPUs: ROCm enumerates it with them, so a run without GPUS= may land on
    it, and a container given all of /dev/dri gets it too. AMD (ROCm/TheRock discussion #8045) recommends hiding it.
    Strix Halo's (gfx1151) is a training target of its own: said, not to be hidden."""
    igpus = [g for g in host.gpus if g.gfx in INTEGRATED_GFX]
    discrete = [g for g in host.gpus if g.gfx in arches and g.gfx not in INTEGRATED_GFX]
    if not igpus or not discrete:
        return []
    out = []
    targets = [g for g in igpus if _integrated_target(g.gfx, arches)]
    if targets:
        which = ", ".join(f"GPU {g.index} ({g.gfx})" for g in targets)
        out.append(Finding("info", f"{which}: the CPU's integrated GPU (Strix Halo), beside the discrete "
                           f"{discrete[0].gfx} GPUs: a run gets the GPUs of its recipe's arch alone",
                           f"ARCH={targets[0].gfx} trains on the integrated GPU, ARCH={discrete[0].gfx} on the discrete ones"))
    hide = [g for g in igpus if g not in targets]
    if hide:
        which = ", ".join(f"GPU {g.index} ({g.gfx}{', ' + g.render_node if g.render_node else ''})" for g in hide)
        keep = ",".join(str(g.index) for g in discrete)
        out.append(Finding("warn", f"the CPU's integrated GPU is enabled: {which}; ROCm lists it beside the "
                           f"{discrete[0].gfx} GPUs and a run without GPUS= may use it",
                           f"disable it in the BIOS/UEFI (Integrated Graphics: Disabled), or run with GPUS={keep}"))
    return out


def memory_share_findings(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """An integrated GPU's memory is the host's: the firmware's carve-out (UMA frame buffer, mem_info_vram_total) and
    the kernel's GTT limit (mem_info_gtt_total: amdgpu.gttsize, ttm.pages_limit), ROCm allocating in GTT when the
    carve-out is small (AMD: https://rocm.docs.amd.com/en/latest/how-to/system-optimization/strixhalo.html). `make
    plan` uses the larger (GPU.memory_share); offloading to "host RAM" gains nothing there."""
    out = []
    for g in host.gpus:
        if not _integrated_target(g.gfx, arches):
            continue
        name = f"GPU {g.index} ({g.gfx}{', ' + g.name if g.name else ''})"
        if g.memory_share is None:
            out.append(Finding("warn", f"{name} is an integrated GPU whose memory share cannot be read "
                               "(no mem_info_vram_total / mem_info_gtt_total in sysfs): `make plan` uses "
                               f"{arches[g.gfx].gpu_memory_gb:g} GB from docker/arches.yaml",
                               "set plan: {gpu_memory_gb: N} in the recipe to the share this machine gives its GPU"))
            continue
        out.append(Finding("ok", f"{name} is an integrated GPU (Strix Halo): its memory is the host's, carve-out "
                           f"{size(g.vram_bytes)} (firmware: UMA frame buffer), GTT {size(g.gtt_bytes)} (the kernel's "
                           f"limit); `make plan` uses {size(g.memory_share)}",
                           "more for the GPU: a larger GTT limit on the kernel command line (ttm.pages_limit=<4 KiB "
                           "pages>), or a larger carve-out in the firmware; AMD's Strix Halo optimization page"))
    return out
