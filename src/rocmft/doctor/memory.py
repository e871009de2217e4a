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


def igpu_findings(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """An enabled Ryzen iGPU beside discrete GPUs: ROCm enumerates it with them, so a run without GPUS= may land on
    it, and a container given all of /dev/dri gets it too. AMD (ROCm/TheRock discussion #8045) recommends hiding it."""
    igpus = [g for g in host.gpus if g.gfx in INTEGRATED_GFX]
    discrete = [g for g in host.gpus if g.gfx in arches and g.gfx not in INTEGRATED_GFX]
    if not igpus or not discrete:
        return []
    which = ", ".join(f"GPU {g.index} ({g.gfx}{', ' + g.render_node if g.render_node else ''})" for g in igpus)
    keep = ",".join(str(g.index) for g in discrete)
    return [Finding("warn", f"the CPU's integrated GPU is enabled: {which}; ROCm lists it beside the "
                    f"{discrete[0].gfx} GPUs and a run without GPUS= may use it",
                    f"disable it in the BIOS/UEFI (Integrated Graphics: Disabled), or run with GPUS={keep}")]
