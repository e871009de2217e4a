"""What this host has, gathered once as data: the user and its groups, the GPU device nodes, the GPUs and
their gfx arch, disk, shared memory, the kernel command line.

`gather()` reads the machine; everything downstream (the container spec, `make doctor`, the GPU count
check before a launch) takes a `HostFacts` as input, so tests build one by hand for any host they need
(an 8x MI300X node, a one-card workstation, a laptop without a GPU).

GPU order is ROCr's order: the KFD topology nodes that have SIMDs, by node number. That is the index
ROCR_VISIBLE_DEVICES and `GPUS=` count in, and each GPU's DRM render node (`drm_render_minor`) is the
device file a container needs to see that GPU and no other.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

KFD_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
PCI_DEVICES = "/sys/bus/pci/devices"  # amdgpu's mem_info_vram_total / mem_info_vis_vram_total per GPU
# KFD io_link type of an xGMI (Infinity Fabric) link (kfd_crat.h CRAT_IOLINK_TYPE_XGMI); PCIe is 2.
IOLINK_XGMI = 11
DRI = "/dev/dri"
KFD = "/dev/kfd"
# Device selection variables are stripped when asking rocminfo: it must list every GPU of the host.
_DEVICE_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


@dataclass(frozen=True)
class GPU:
    index: int  # ROCr's index: what GPUS= and ROCR_VISIBLE_DEVICES count in
    gfx: str  # e.g. gfx942; "" when unknown
    name: str = ""  # marketing name when a tool reports it (AMD Instinct MI300X)
    render_node: str | None = None  # /dev/dri/renderD128: the device file that gives a container this GPU
    pci: str = ""  # 0000:0c:00.0
    device_id: int | None = None  # PCI device id (KFD's device_id): which product of the arch (docker/arches.yaml)
    compute_units: int | None = None  # as KFD counts them (simd_count / simd_per_cu); fewer in a compute partition
    node: int | None = None  # the KFD topology node: what its links name
    # KFD nodes this GPU reaches peer-to-peer: its p2p_links (PCIe peers KFD found accessible: Linux 6.0+, kernel
    # built with HSA_AMD_P2P, large BAR) and its xGMI io_links. None: the kernel lists no p2p_links (cannot tell).
    peers: tuple[int, ...] | None = None
    xgmi_peers: tuple[int, ...] = ()
    vram_bytes: int | None = None  # amdgpu's mem_info_vram_total
    visible_vram_bytes: int | None = None  # mem_info_vis_vram_total: the VRAM the PCIe BAR exposes
    gtt_bytes: int | None = None  # mem_info_gtt_total: the system RAM the GPU may map (the kernel's GTT limit)

    @property
    def memory_share(self) -> int | None:
        """What an integrated GPU (Strix Halo) can allocate: on such an APU ROCm allocates in GTT when the firmware's
        carve-out (mem_info_vram_total) is small (the kernel's "drm/amdkfd: Let VRAM allocations go to GTT domain on
        small APUs"; AMD's Strix Halo page: GTT is the pool PyTorch uses), in the carve-out otherwise: the larger."""
        shares = [b for b in (self.vram_bytes, self.gtt_bytes) if b]
        return max(shares) if shares else None


@dataclass(frozen=True)
class HostFacts:
    uid: int
    gid: int
    user: str
    project_root: str
    hf_home: str  # the HF cache the job uses: $HF_HOME, else ~/.cache/huggingface
    hf_home_explicit: bool = False  # set by the user (then it must exist) or the default (created on demand)
    runs_dir: str = ""  # "" = <project_root>/runs
    home: str = ""
    hostname: str = ""
    groups: tuple[int, ...] = ()  # the launcher's current group ids (primary + supplementary)
    video_gid: int | None = None
    render_gid: int | None = None
    devices: tuple[str, ...] = ()  # GPU device nodes present: /dev/kfd, /dev/dri/renderD*, /dev/dri/card*
    accessible: tuple[str, ...] = ()  # those of `devices` this user can open read-write
    gpus: tuple[GPU, ...] = ()
    gpu_source: str = ""  # sysfs | rocminfo | amd-smi | "" (none found)
    tools: Mapping[str, str] = field(default_factory=dict)  # rocminfo/amd-smi path when installed
    shm_bytes: int | None = None
    disk_free: Mapping[str, int] = field(default_factory=dict)  # path -> free bytes
    kernel_cmdline: str = ""
    iommu_active: bool = False
    numa_balancing: int | None = None  # /proc/sys/kernel/numa_balancing; None = not readable (no NUMA kernel)
    amdgpu_version: str = ""  # /sys/module/amdgpu/version: AMD's amdgpu-dkms driver; "" = the kernel's own (inbox) one

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def gpu_arches(self) -> tuple[str, ...]:
        """The distinct gfx arches, in GPU order."""
        seen: list[str] = []
        for gpu in self.gpus:
            if gpu.gfx and gpu.gfx not in seen:
                seen.append(gpu.gfx)
        return tuple(seen)

    def gpus_of(self, gfx: str) -> tuple[GPU, ...]:
        """The GPUs of one arch, in ROCr order: what a run for that arch gets by default (an RX 7900 XTX host
        with the Ryzen iGPU, gfx1036, enabled lists both; the job must see the gfx1100 alone)."""
        return tuple(g for g in self.gpus if g.gfx == gfx)

    def render_nodes(self, indices) -> tuple[str, ...] | None:
        """The render nodes of the GPUs with these ROCr indices; None when any is not known."""
        by_index = {str(g.index): g for g in self.gpus}
        nodes = []
        for index in indices:
            gpu = by_index.get(str(index))
            if gpu is None or not gpu.render_node:
                return None
            nodes.append(gpu.render_node)
        return tuple(nodes)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tools"] = dict(self.tools)
        data["disk_free"] = dict(self.disk_free)
        return data


# ---------------------------------------------------------------- parsers (pure: text in, data out)

def gfx_from_target_version(value: int | str) -> str:
    """KFD's gfx_target_version (90402) -> gfx942; major*10000 + minor*100 + stepping, minor/stepping in hex."""
    number = int(value)
    if number <= 0:
        return ""
    major, minor, step = number // 10000, (number // 100) % 100, number % 100
    return f"gfx{major}{minor:x}{step:x}"


def parse_properties(text: str) -> dict[str, str]:
    props = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            props[parts[0]] = parts[1]
    return props


def _pci(props: Mapping[str, str]) -> str:
    try:
        location, domain = int(props.get("location_id", "0")), int(props.get("domain", "0"))
    except ValueError:
        return ""
    if not location:
        return ""
    return f"{domain:04x}:{location >> 8:02x}:{(location >> 3) & 0x1f:02x}.{location & 0x7}"


def _number(props: Mapping[str, str], key: str) -> int | None:
    try:
        value = int(props.get(key, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _links(folder: Path) -> list[dict[str, str]] | None:
    """The properties of each link under a node's io_links/ or p2p_links/; None when the folder is absent."""
    if not folder.is_dir():
        return None
    found = []
    for link in sorted(folder.iterdir(), key=lambda p: p.name):
        try:
            found.append(parse_properties((link / "properties").read_text()))
        except OSError:
            continue
    return found


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def gpus_from_sysfs(topology: str | Path | None = None, dri: str = DRI, pci_devices: str | Path | None = None) -> list[GPU]:
    """The KFD topology: nodes with SIMDs are GPUs, in node order (ROCr's order)."""
    base = Path(topology or KFD_TOPOLOGY)
    pci_base = Path(pci_devices or PCI_DEVICES)
    if not base.is_dir():
        return []
    nodes = sorted((p for p in base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    found = []
    for node in nodes:
        try:
            props = parse_properties((node / "properties").read_text())
        except OSError:
            continue
        if int(props.get("simd_count", "0") or 0) <= 0:
            continue  # a CPU node
        minor = props.get("drm_render_minor")
        render = f"{dri}/renderD{minor}" if minor and minor.isdigit() and int(minor) > 0 else None
        simds, per_cu = _number(props, "simd_count"), _number(props, "simd_per_cu")
        io_links = _links(node / "io_links") or []
        p2p = _links(node / "p2p_links")
        xgmi = tuple(int(link["node_to"]) for link in io_links
                     if link.get("type") == str(IOLINK_XGMI) and link.get("node_to", "").isdigit())
        peers = None if p2p is None else tuple(sorted({*xgmi, *(int(link["node_to"]) for link in p2p
                                                              if link.get("node_to", "").isdigit())}))
        pci = _pci(props)
        found.append(GPU(index=len(found), gfx=gfx_from_target_version(props.get("gfx_target_version", "0")),
                         render_node=render, pci=pci, device_id=_number(props, "device_id"),
                         compute_units=simds // per_cu if simds and per_cu else None, node=int(node.name),
                         peers=peers, xgmi_peers=xgmi,
                         vram_bytes=_read_int(pci_base / pci / "mem_info_vram_total") if pci else None,
                         visible_vram_bytes=_read_int(pci_base / pci / "mem_info_vis_vram_total") if pci else None,
                         gtt_bytes=_read_int(pci_base / pci / "mem_info_gtt_total") if pci else None))
    return found


_AGENT = re.compile(r"^\s*Agent\s+\d+\s*$", re.MULTILINE)


def gpus_from_rocminfo(text: str) -> list[GPU]:
    """`rocminfo` output: the agents whose Device Type is GPU, in order (ROCr's order)."""
    found = []
    for block in _AGENT.split(text)[1:]:
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() and key.strip() not in fields:
                fields[key.strip()] = value.strip()
        if fields.get("Device Type", "").upper() != "GPU":
            continue
        gfx = fields.get("Name", "")
        found.append(GPU(index=len(found), gfx=gfx if gfx.startswith("gfx") else "",
                         name=fields.get("Marketing Name", "")))
    return found


def gpus_from_amd_smi(text: str) -> list[GPU]:
    """`amd-smi static --asic --json`: a list of {gpu, asic: {market_name, target_graphics_version}}."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    if isinstance(data, dict):
        data = data.get("gpu_data", [data])
    found = []
    for entry in data if isinstance(data, list) else []:
        asic = entry.get("asic", {}) if isinstance(entry, dict) else {}
        gfx = str(asic.get("target_graphics_version", "") or "")
        name = str(asic.get("market_name", "") or "")
        index = entry.get("gpu", len(found))
        found.append(GPU(index=int(index) if str(index).isdigit() else len(found),
                         gfx=gfx if gfx.startswith("gfx") else "", name=name))
    return found


def merge_gpus(sysfs: list[GPU], named: list[GPU]) -> list[GPU]:
    """sysfs knows the render nodes; rocminfo/amd-smi know the names: join them when they agree on count."""
    if not sysfs:
        return list(named)
    if len(named) != len(sysfs):
        return list(sysfs)
    return [replace(s, gfx=s.gfx or n.gfx, name=n.name) for s, n in zip(sysfs, named, strict=True)]


# ---------------------------------------------------------------- gathering (reads this machine)

def _gid(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _run_tool(argv: list[str], env: Mapping[str, str]) -> str:
    clean = {k: v for k, v in env.items() if k not in _DEVICE_VARS}
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=clean)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout if out.returncode == 0 else ""


def device_nodes(dri: str = DRI, kfd: str = KFD) -> tuple[str, ...]:
    found = [kfd] if os.path.exists(kfd) else []
    if os.path.isdir(dri):
        found += sorted(str(p) for p in Path(dri).iterdir() if p.name.startswith(("renderD", "card")))
    return tuple(found)


def default_hf_home(env: Mapping[str, str], home: str) -> tuple[str, bool]:
    if env.get("HF_HOME"):
        return str(Path(env["HF_HOME"]).expanduser().resolve()), True
    base = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return str(Path(base, "huggingface").resolve()), False


def gather(env: Mapping[str, str] | None = None, *, project_root: str | None = None, tools: bool = True) -> HostFacts:
    """Read this machine. `tools=False` skips rocminfo/amd-smi (sysfs only; fast)."""
    from ..io import paths

    env = os.environ if env is None else env
    uid, gid = os.getuid(), os.getgid()
    try:
        entry = pwd.getpwuid(uid)
        user, home = entry.pw_name, entry.pw_dir
    except KeyError:
        user, home = str(uid), env.get("HOME", "/tmp")
    home = env.get("HOME") or home
    root = project_root or str(paths.root())
    hf_home, explicit = default_hf_home(env, home)
    devices = device_nodes()
    accessible = tuple(d for d in devices if os.access(d, os.R_OK | os.W_OK))

    found_tools = {name: path for name in ("rocminfo", "amd-smi") if (path := shutil.which(name, path=env.get("PATH")))}
    sysfs = gpus_from_sysfs()
    named: list[GPU] = []
    if tools and "rocminfo" in found_tools:
        named = gpus_from_rocminfo(_run_tool([found_tools["rocminfo"]], env))
    if tools and not named and "amd-smi" in found_tools:
        named = gpus_from_amd_smi(_run_tool([found_tools["amd-smi"], "static", "--asic", "--json"], env))
    gpus = merge_gpus(sysfs, named)
    source = "sysfs" if sysfs else ("rocminfo" if named and "rocminfo" in found_tools else ("amd-smi" if named else ""))

    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_blocks * st.f_frsize
    except OSError:
        shm = None
    runs_dir = str(paths.runs_dir()) if project_root is None else str(Path(root) / "runs")
    disk = {}
    for path in dict.fromkeys((root, runs_dir)):
        probe = Path(path)
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            disk[path] = shutil.disk_usage(probe).free
        except OSError:
            pass
    try:
        cmdline = Path("/proc/cmdline").read_text().strip()
    except OSError:
        cmdline = ""
    iommu = Path("/sys/class/iommu").is_dir() and any(Path("/sys/class/iommu").iterdir())
    return HostFacts(
        uid=uid, gid=gid, user=user, project_root=root, hf_home=hf_home, hf_home_explicit=explicit,
        runs_dir=runs_dir, home=home, hostname=socket.gethostname(), groups=tuple(sorted({gid, *os.getgroups()})),
        video_gid=_gid("video"), render_gid=_gid("render"), devices=devices, accessible=accessible,
        gpus=tuple(gpus), gpu_source=source, tools=found_tools, shm_bytes=shm, disk_free=disk,
        kernel_cmdline=cmdline, iommu_active=iommu, numa_balancing=numa_balancing(), amdgpu_version=amdgpu_version(),
    )


def numa_balancing(proc: str | Path = "/proc") -> int | None:
    """The kernel's NUMA auto-balancing switch (0 off, 1 on, 2 tiering), None when the file is absent."""
    try:
        return int((Path(proc) / "sys/kernel/numa_balancing").read_text().strip())
    except (OSError, ValueError):
        return None


def amdgpu_version(sys_root: str | Path = "/sys") -> str:
    """The amdgpu module's version: set by AMD's amdgpu-dkms driver (e.g. 6.16.6), absent for the kernel's inbox one."""
    try:
        return (Path(sys_root) / "module/amdgpu/version").read_text().strip()
    except OSError:
        return ""


def physical_cores(cpu_root: str | Path = "/sys/devices/system/cpu") -> int:
    """Physical cores of this host: distinct (package, core) pairs of the online CPUs' topology (SMT siblings
    counted once); os.cpu_count() where sysfs does not say."""

    root = Path(cpu_root)
    cores = set()
    for topo in root.glob("cpu[0-9]*/topology"):
        try:
            cores.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
        except OSError:
            continue
    return len(cores) or os.cpu_count() or 1
