"""`make doctor`: is this host ready to train in the arch's container? One finding per check, each failure
with the command that fixes it; one module per family of checks (devices, memory, interconnect, daemon).

Pure: `check(host, docker, arches)` takes the host's facts (rocmft.hardware.host.HostFacts) and the daemon's
(`DockerFacts`, gathered by `docker_facts()`) and returns a `Report`; tests build both by hand.

May import: io, hardware, image, launch.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..hardware.host import HostFacts
from .daemon import DockerFacts, docker_facts, docker_findings, runs_disk_findings
from .devices import device_findings, driver_findings, gpu_findings, no_gpu
from .interconnect import iommu_findings, peer_to_peer
from .memory import igpu_findings, memory_share_findings, numa_balancing_findings, shm_findings
from .report import Finding, Report, render

__all__ = ["DockerFacts", "Finding", "Report", "check", "docker_facts", "render"]


def check(host: HostFacts, docker: DockerFacts, arches: Mapping[str, Any], *, arch: str | None = None) -> Report:
    """`arch`: the arch the user means to run (ARCH=); by default the one the GPUs are."""
    none = no_gpu(host)
    gpus = gpu_findings(host, arches, arch)
    findings = [*device_findings(host), *gpus.findings, *docker_findings(docker, gpus.target, none),
                *runs_disk_findings(host, none), *shm_findings(host, none), *iommu_findings(host),
                *peer_to_peer(host, arches), *numa_balancing_findings(host, arches),
                *driver_findings(host, arches, gpus.target), *igpu_findings(host, arches),
                *memory_share_findings(host, arches)]
    return Report(findings, gpus.lines, gpus.suggested, none)
