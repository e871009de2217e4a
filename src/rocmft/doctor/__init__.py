"""`make doctor`: is this host ready to train in the arch's container? One finding per check, each failure
with the command that fixes it.

Pure: `check(host, docker, arches)` takes the host's facts (rocmft.host.HostFacts) and the daemon's
(`DockerFacts`, gathered by `docker_facts()`) and returns a `Report`; tests build both by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..host import DRI, KFD, HostFacts
from ..image.docker_api import START_DAEMON

GiB = 1024 ** 3
# Free space worth warning about. A ROCm PyTorch image is ~25-30 GB unpacked; a full fine-tune checkpoint
# of an 8B model with its optimizer states ~110 GB (bf16 weights 16 + fp32 master 32 + Adam 64).
IMAGE_DISK_GPU = 60 * GiB
IMAGE_DISK_CPU = 5 * GiB
RUNS_DISK_GPU = 200 * GiB
RUNS_DISK_CPU = 2 * GiB
SHM_GPU = 16 * GiB  # containers share the host's /dev/shm (ipc=host): RCCL and dataloaders live there


@dataclass(frozen=True)
class Finding:
    level: str  # ok | info | warn | fail
    what: str
    fix: str = ""


@dataclass(frozen=True)
class DockerFacts:
    configured: bool  # DOCKER_HOST set or /var/run/docker.sock present
    reachable: bool
    where: str = ""
    error: str = ""
    version: str = ""
    root_dir: str = ""
    root_free: int | None = None
    images: Mapping[str, str] = field(default_factory=dict)  # arch -> "tag (short id)" of a usable image
    wrong_arch: Mapping[str, str] = field(default_factory=dict)  # arch -> why its tag is not usable


@dataclass
class Report:
    findings: list[Finding]
    gpus: list[str]  # one line per GPU
    suggested_arch: str | None
    no_gpu: bool

    @property
    def failed(self) -> bool:
        return any(f.level == "fail" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [asdict(f) for f in self.findings], "gpus": self.gpus,
                "suggested_arch": self.suggested_arch, "no_gpu": self.no_gpu, "failed": self.failed}


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n / GiB:.1f} GiB"


def check(host: HostFacts, docker: DockerFacts, arches: Mapping[str, Any], *, arch: str | None = None) -> Report:
    """`arch`: the arch the user means to run (ARCH=); by default the one the GPUs are."""
    out: list[Finding] = []

    def add(level: str, what: str, fix: str = "") -> None:
        out.append(Finding(level, what, fix))

    has_kfd = KFD in host.devices
    render_nodes = [d for d in host.devices if d.startswith(DRI + "/renderD")]
    no_gpu = not host.gpus and not has_kfd and not render_nodes
    usermod = f"sudo usermod -aG video,render {host.user}, then log out and back in"

    # ---- the GPU, its driver and device files
    if no_gpu:
        add("info", "No AMD GPU on this machine: /dev/kfd is missing and the kernel lists no GPU "
            "(/sys/class/kfd). The GPU recipes cannot run here.",
            "`make demo` trains the tiny model on this CPU; for a GPU run use a host with an AMD GPU "
            "and the amdgpu driver, and run `make doctor` there")
    else:
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

    # ---- the GPUs and their arch
    def product(g) -> str | None:
        a = arches.get(g.gfx)
        return a.identify(g.device_id, g.compute_units, g.name) if a is not None else None

    gpus = [f"GPU {g.index}: {g.gfx or 'unknown gfx'}" + (f" {g.name or product(g) or ''}".rstrip())
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
                    add("ok", f"{name} is {p}: `make plan` uses its figures ({f.gpu_memory_gb:g} GB, {peak}, "
                        f"{f.gpus_per_node} per node)")
            else:
                ids = ", ".join(sorted({f"0x{g.device_id:04x}" for g in mine if g.device_id})) or "no device id"
                add("warn", f"{name} GPUs ({ids}) are not a product docker/arches.yaml knows: "
                    f"`make plan` uses {a.product}'s figures", f"set plan: {{product: ...}} in the recipe ({', '.join(a.products)})")
        if not host.tools:
            add("info", "neither rocminfo nor amd-smi is installed on the host; GPUs read from sysfs",
                "optional: install rocminfo/amd-smi for product names")
    elif not no_gpu:
        add("fail", "the driver is present but no GPU is listed in /sys/class/kfd/kfd/topology",
            "check `dmesg | grep -i amdgpu` (firmware, unsupported card) and `rocminfo`")
    target = arch or suggested or ("cpu" if no_gpu else None)
    if arch and suggested and arch != suggested:
        add("warn", f"ARCH={arch} but this host's GPUs are {suggested}", f"ARCH={suggested}")

    # ---- Docker and the image
    docker_level = "warn" if no_gpu else "fail"
    if docker.reachable:
        add("ok", f"Docker daemon reachable at {docker.where} (server {docker.version or '?'})")
        if target:
            if target in docker.images:
                add("ok", f"image for ARCH={target}: {docker.images[target]}")
            elif target in docker.wrong_arch:
                add(docker_level, f"image for ARCH={target}: {docker.wrong_arch[target]}", _image_fix(target))
            else:
                add(docker_level, f"no image for ARCH={target}", _image_fix(target))
        if docker.root_free is not None:
            need = IMAGE_DISK_CPU if target in (None, "cpu") else IMAGE_DISK_GPU
            level = "ok" if docker.root_free >= need else "warn"
            add(level, f"free disk for images ({docker.root_dir or 'Docker root'}): {_size(docker.root_free)}",
                "" if level == "ok" else f"a {target or 'ROCm'} image needs ~{_size(need)}: `docker system prune`, or move "
                "Docker's data-root to a larger disk")
    elif docker.configured:
        add(docker_level, f"Docker daemon not reachable at {docker.where}: {docker.error}",
            "add yourself to the `docker` group (then log in again)" if "ermission" in docker.error else
            START_DAEMON)
    else:
        add(docker_level, "no Docker daemon configured (DOCKER_HOST unset, no /var/run/docker.sock)",
            "install and start Docker (`sudo apt-get install docker.io`), or as root `eval \"$(scripts/ci/dockerd-up.sh)\"`; "
            "without Docker: RUNTIME=local")

    # ---- disk for checkpoints, shared memory, IOMMU
    runs_path = host.runs_dir if host.runs_dir in host.disk_free else next(iter(host.disk_free), None)
    if runs_path is not None:  # checkpoints land in the runs dir
        free = host.disk_free[runs_path]
        need = RUNS_DISK_CPU if no_gpu else RUNS_DISK_GPU
        level = "ok" if free >= need else "warn"
        add(level, f"free disk for runs and checkpoints ({runs_path}): {_size(free)}",
            "" if level == "ok" else "full fine-tunes of 8B models write ~110 GB per checkpoint: free space, keep fewer "
            "checkpoints (save_total_limit), or point ROCMFT_RUNS at a larger disk")
    if host.shm_bytes is not None:
        if no_gpu:
            add("ok", f"shared memory /dev/shm: {_size(host.shm_bytes)} (CPU containers get a private 2 GB one)")
        elif host.shm_bytes < SHM_GPU:
            add("warn", f"shared memory /dev/shm is {_size(host.shm_bytes)}; containers share it (ipc=host) with RCCL and "
                "the dataloaders", f"raise it to >= {_size(SHM_GPU)}: `sudo mount -o remount,size=64G /dev/shm` "
                "(persist in /etc/fstab)")
        else:
            add("ok", f"shared memory /dev/shm: {_size(host.shm_bytes)}")
    if len(host.gpus) > 1:
        args = host.kernel_cmdline.split()
        if "iommu=pt" in args:
            add("ok", "iommu=pt on the kernel command line (multi-GPU peer-to-peer at full speed)")
        elif not host.iommu_active or "amd_iommu=off" in args or "intel_iommu=off" in args:
            add("ok", "IOMMU off: no pass-through setting needed")
        else:
            add("warn", f"{len(host.gpus)} GPUs and the IOMMU translates DMA: without iommu=pt, GPU peer-to-peer "
                "traffic is slow or hangs (AMD's multi-GPU guidance)",
                "add iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub, `sudo update-grub`, reboot")
    out += peer_to_peer(host, arches)
    out += numa_balancing_findings(host, arches)
    out += driver_findings(host, arches, target)
    out += igpu_findings(host, arches)
    return Report(out, gpus, suggested, no_gpu)


# ---- host tuning for Instinct/Radeon training (issue 31): each a function of its own, each failure with its fix

# The integrated GPUs of AMD's Ryzen CPUs (LLVM AMDGPU processor table: Renoir/Cezanne, Rembrandt, Raphael/Granite
# Ridge, Phoenix/Hawk Point, Strix Point, Strix Halo, Krackan). MI300A (gfx942) is an APU too, but a training target.
INTEGRATED_GFX = ("gfx90c", "gfx1035", "gfx1036", "gfx1103", "gfx1150", "gfx1151", "gfx1152")


def _instinct(host: HostFacts, arches: Mapping[str, Any]) -> bool:
    return any(g.gfx in arches and str(arches[g.gfx].family).startswith("cdna") for g in host.gpus)


def numa_balancing_findings(host: HostFacts, arches: Mapping[str, Any]) -> list[Finding]:
    """AMD's MI300X system tuning: disable NUMA auto-balancing, whose page scans can stall GPU kernels until the
    balancing pass ends (the GPU looks hung). Only multi-GPU Instinct hosts: where AMD's guidance applies."""
    if len(host.gpus) < 2 or not _instinct(host, arches) or host.numa_balancing is None:
        return []
    if host.numa_balancing == 0:
        return [Finding("ok", "NUMA auto-balancing off (/proc/sys/kernel/numa_balancing = 0)")]
    return [Finding("warn", f"NUMA auto-balancing is on (/proc/sys/kernel/numa_balancing = {host.numa_balancing}): "
                    "on a multi-GPU Instinct host the GPUs can stall until a balancing pass ends (AMD's MI300X "
                    "system tuning: disable it)",
                    "`sudo sysctl kernel.numa_balancing=0`; persist it: "
                    "`echo kernel.numa_balancing=0 | sudo tee /etc/sysctl.d/90-rocm.conf`")]


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
    level = "warn" if _instinct(host, arches) else "info"
    return [Finding(level, f"amdgpu is the kernel's inbox driver (no /sys/module/amdgpu/version): the {target or 'ROCm'} "
                    f"image's ROCm {rocm} is validated with AMD's amdgpu-dkms driver"
                    + (", which Instinct GPUs require" if level == "warn" else ""),
                    f"install the amdgpu-dkms driver of ROCm {rocm}: `sudo amdgpu-install --usecase=dkms`, then reboot")]


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
        bar_fix = "; ".join(f"GPU {g.index} exposes {_size(g.visible_vram_bytes)} of its {_size(g.vram_bytes)} VRAM on the "
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


def _image_fix(arch: str) -> str:
    if arch == "cpu":
        return "`make wheelhouse ARCH=cpu` then `make image ARCH=cpu OFFLINE=1` (no registry needed)"
    return f"`make image ARCH={arch}`"


def docker_facts(arch_names, env: Mapping[str, str] | None = None) -> DockerFacts:
    """Ask the daemon (when one is configured): reachable? version, data root, free space, an image per arch."""
    import os
    import shutil

    from ..launch.docker import daemon_configured

    env = os.environ if env is None else env
    where = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    configured = daemon_configured(env)
    if not configured:
        return DockerFacts(configured=False, reachable=False, where=where)
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        info = client.info()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable", with its reason
        return DockerFacts(configured=True, reachable=False, where=where, error=(str(exc).splitlines() or ["?"])[0][:200])
    root = info.get("DockerRootDir", "")
    free = None
    if root:
        try:
            free = shutil.disk_usage(root).free  # the same machine when the socket is local
        except OSError:
            free = None
    images, wrong = {}, {}
    try:
        from ..image import find_image, image_arch

        for name in arch_names:
            image = find_image(client, name)
            if image is None:
                continue
            tag = (image.tags or [image.short_id])[0]
            built = image_arch(image)
            if built == name:
                images[name] = f"{tag} ({image.short_id})"
            else:
                wrong[name] = f"{tag} is built for {built or 'no rocmft arch (no ai.rocmft.arch label)'}"
    except Exception:  # noqa: BLE001 - the image module is optional for a doctor run
        pass
    return DockerFacts(configured=True, reachable=True, where=where, version=info.get("ServerVersion", ""),
                       root_dir=root, root_free=free, images=images, wrong_arch=wrong)


def render(report: Report) -> list[str]:
    marks = {"ok": "ok  ", "info": "note", "warn": "WARN", "fail": "FAIL"}
    lines = ["rocmft doctor: is this host ready for `make train` in a container?"]
    for f in report.findings:
        lines.append(f"  {marks[f.level]}  {f.what}")
        if f.fix and f.level in ("warn", "fail", "info"):
            lines.append(f"        {'next' if f.level == 'info' else 'fix'}: {f.fix}")
    if report.gpus:
        lines.append("GPUs (ROCr order, what GPUS= counts in):")
        lines += [f"  {g}" for g in report.gpus]
    if report.no_gpu:
        lines.append("No GPU here: the GPU path needs an AMD GPU. Try `make demo` (a tiny model on CPU: "
                     "~1.5 min from a fresh clone, ~45 s once .venv is set up; docs/development.md).")
    elif report.suggested_arch:
        lines.append(f"Suggested: ARCH={report.suggested_arch}  (e.g. make train RECIPE=... ARCH={report.suggested_arch})")
    # Devices and drivers present say nothing of what they compute: the canary trains on this stack.
    lines.append("Numerics: `make canary RECIPE=...` checks this stack's precision/attention/Liger against an fp32 "
                 "reference in a few steps of the tiny model (`make train CANARY=1` runs it before launching)")
    fails = sum(f.level == "fail" for f in report.findings)
    warns = sum(f.level == "warn" for f in report.findings)
    lines.append(f"{fails} failure(s), {warns} warning(s)" + (": fix the FAIL lines first" if fails else ""))
    return lines
