"""`make doctor`'s device checks: the driver's device files and the groups that open them, the GPUs and their arch
(which image, which product's figures `make plan` uses), and the amdgpu driver beside the image's ROCm."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..hardware.host import DRI, KFD, HostFacts
from .report import Finding


def no_gpu(host: HostFacts) -> bool:
    return not host.gpus and KFD not in host.devices and not _render_nodes(host)


def _render_nodes(host: HostFacts) -> list[str]:
    return [d for d in host.devices if d.startswith(DRI + "/renderD")]


def device_findings(host: HostFacts) -> list[Finding]:
    """The GPU's device files and who may open them (nothing to say on a host without a GPU but that)."""
    out: list[Finding] = []

    def add(level: str, what: str, fix: str = "") -> None:
        out.append(Finding(level, what, fix))

    has_kfd = KFD in host.devices
    render_nodes = _render_nodes(host)
    usermod = f"sudo usermod -aG video,render {host.user}, then log out and back in"
    if no_gpu(host):
        add("info", "No AMD GPU on this machine: /dev/kfd is missing and the kernel lists no GPU "
            "(/sys/class/kfd). The GPU recipes cannot run here.",
            "`make demo` trains the tiny model on this CPU; for a GPU run use a host with an AMD GPU "
            "and the amdgpu driver, and run `make doctor` there")
        return out
    if not has_kfd:
        add("fail", f"{KFD} is missing: the amdgpu kernel driver (KFD) is not loaded",
            "install the ROCm/amdgpu driver (amdgpu-dkms) and reboot; check `dmesg | grep -i amdgpu`")
    elif KFD not in host.accessible:
        add("fail", f"{KFD} is not readable and writable by {host.user}", usermod)
    else:
        add("ok", f"{KFD} present and accessible")
    if not render_nodes:
        add("fail", f"{DRI} has no render nodes (renderD*)", "check the amdgpu driver: `ls -l /dev/dri`, `dmesg | grep -i amdgpu`")
    else:
        blocked = [d for d in render_nodes if d not in host.accessible]
        if blocked:
            add("fail", f"{', '.join(blocked)} not accessible to {host.user}", usermod)
        else:
            add("ok", f"{DRI}: {len(render_nodes)} render node(s) accessible")
    if host.uid == 0:
        add("ok", "running as root: device access does not depend on groups")
    else:
        for group, gid in (("video", host.video_gid), ("render", host.render_gid)):
            if gid is None:
                add("info", f"no `{group}` group on this host")
            elif gid in host.groups:
                add("ok", f"{host.user} is in `{group}` (gid {gid})")
            else:
                add("warn", f"{host.user} is not in `{group}` (gid {gid}): host tools (rocminfo, amd-smi) "
                    "cannot open the GPUs; containers get the group by GID anyway", usermod)
    return out


@dataclass
class Gpus:
    """The GPUs section's findings, a line per GPU, the arch they suggest, and the arch the user means to run."""
    findings: list[Finding] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    suggested: str | None = None
    target: str | None = None


def gpu_findings(host: HostFacts, arches: Mapping[str, Any], arch: str | None) -> Gpus:
    """`arch`: the arch the user means to run (ARCH=); by default the one the GPUs are."""
    out: list[Finding] = []

    def add(level: str, what: str, fix: str = "") -> None:
        out.append(Finding(level, what, fix))

    def product(g) -> str | None:
        a = arches.get(g.gfx)
        return a.identify(g.device_id, g.compute_units, g.name) if a is not None else None

    def kind(g) -> str:  # a discrete card or the CPU's own GPU (Strix Halo's iGPU is a training target too)
        a = arches.get(g.gfx)
        return " integrated" if a is not None and getattr(a, "integrated", False) else ""

    gpus = [f"GPU {g.index}: {g.gfx or 'unknown gfx'}" + (f" {g.name or product(g) or ''}".rstrip()) + kind(g)
            + (f" ({g.render_node})" if g.render_node else "") + (f" [{g.pci}]" if g.pci else "") for g in host.gpus]
    suggested = None
    if host.gpus:
        found = host.gpu_arches
        source = host.gpu_source + ("" if host.gpu_source != "sysfs" or not host.tools else
                                    f" + {', '.join(sorted(host.tools))}")
        known = [a for a in found if a in arches]
        summary = ", ".join(f"{sum(1 for g in host.gpus if g.gfx == a)} x {a}" for a in found) or "arch unknown"
        add("ok", f"{len(host.gpus)} GPU(s): {summary} (from {source})")
        unknown = [a for a in found if a not in arches]
        if unknown:
            add("warn", f"{', '.join(unknown)} is not in docker/arches.yaml: no image or recipe targets it",
                f"supported: {', '.join(a for a in arches if a != 'cpu')}")
        if len(found) > 1:
            add("warn", f"this host mixes GPU arches ({', '.join(found)}): one image serves one arch; a run gets the "
                "GPUs of its recipe's arch alone (their render nodes), GPUS= selects among all",
                "nothing to do for a run; an integrated GPU can also be switched off in the BIOS")
        suggested = known[0] if known else None
        for name in known:
            a = arches[name]
            if not a.product_table:
                continue
            mine = [g for g in host.gpus if g.gfx == name]
            named = sorted({p for p in map(product, mine) if p})
            if named:
                for p in named:
                    f = a.for_product(p)
                    peak = f"{f.peak('bf16'):g} bf16 TFLOP/s" if f.peak("bf16") else "no known bf16 peak"
                    memory = "its memory share below" if f.integrated else f"{f.gpu_memory_gb:g} GB"
                    add("ok", f"{name} is {p}: `make plan` uses its figures ({memory}, {peak}, "
                        f"{f.gpus_per_node} per node)")
            else:
                ids = ", ".join(sorted({f"0x{g.device_id:04x}" for g in mine if g.device_id})) or "no device id"
                add("warn", f"{name} GPUs ({ids}) are not a product docker/arches.yaml knows: "
                    f"`make plan` uses {a.product}'s figures", f"set plan: {{product: ...}} in the recipe ({', '.join(a.products)})")
        if not host.tools:
            add("info", "neither rocminfo nor amd-smi is installed on the host; GPUs read from sysfs",
                "optional: install rocminfo/amd-smi for product names")
    elif not no_gpu(host):
        add("fail", "the driver is present but no GPU is listed in /sys/class/kfd/kfd/topology",
            "check `dmesg | grep -i amdgpu` (firmware, unsupported card) and `rocminfo`")
    target = arch or suggested or ("cpu" if no_gpu(host) else None)
    if arch and suggested and arch != suggested:
        add("warn", f"ARCH={arch} but this host's GPUs are {suggested}", f"ARCH={suggested}")
    return Gpus(out, gpus, suggested, target)


def driver_findings(host: HostFacts, arches: Mapping[str, Any], target: str | None) -> list[Finding]:
    """The amdgpu driver beside the image's ROCm. ROCm's user space in the image talks to the host's KFD: AMD
    validates each ROCm release against its own amdgpu-dkms driver (ROCm's compatibility matrix), and Instinct
    installs require it; the inbox driver of a distribution kernel may lack what a newer ROCm asks for."""
    if KFD not in host.devices or not host.gpus:
        return []
    a = arches.get(target) if target else None
    rocm = getattr(a, "rocm", "") or "?"
    if host.amdgpu_version:
        return [Finding("info", f"amdgpu driver {host.amdgpu_version} (amdgpu-dkms); the {target} image runs ROCm {rocm}",
                        f"check the pair in ROCm {rocm}'s compatibility matrix (rocm.docs.amd.com, "
                        "\"Compatibility matrix\"); upgrade with the amdgpu-install of that release: "
                        "`sudo amdgpu-install --usecase=dkms`")]
    level = "warn" if instinct(host, arches) else "info"
    return [Finding(level, f"amdgpu is the kernel's inbox driver (no /sys/module/amdgpu/version): the {target or 'ROCm'} "
                    f"image's ROCm {rocm} is validated with AMD's amdgpu-dkms driver"
                    + (", which Instinct GPUs require" if level == "warn" else ""),
                    f"install the amdgpu-dkms driver of ROCm {rocm}: `sudo amdgpu-install --usecase=dkms`, then reboot")]


def instinct(host: HostFacts, arches: Mapping[str, Any]) -> bool:
    return any(g.gfx in arches and str(arches[g.gfx].family).startswith("cdna") for g in host.gpus)
