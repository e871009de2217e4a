"""docker/entrypoint.sh against fake /dev and /sys trees (ROCMFT_CHECK_ROOT): every failure is reported
with its fix, a matching GPU passes, cpu images and ROCMFT_SKIP_GPU_CHECK=1 skip the checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from rocmft.hardware import arches

ENTRYPOINT = Path(__file__).resolve().parents[3] / "docker" / "entrypoint.sh"
TABLE = " ".join(name for name, a in arches.table().items() if a.is_gpu)  # what the launcher passes


def fake_root(tmp_path: Path, gfx_target_versions: list[int], *, kfd: bool = True, render: bool = True) -> Path:
    root = tmp_path / "root"
    (root / "dev" / "dri").mkdir(parents=True)
    if kfd:
        (root / "dev" / "kfd").write_text("")
    if render:
        (root / "dev" / "dri" / "renderD128").write_text("")
    nodes = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for i, version in enumerate([0, *gfx_target_versions]):  # node 0 is the CPU (version 0)
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\nsimd_count 0\n")
    return root


def run(env: dict, *argv: str, user: str | None = None, entrypoint: Path = ENTRYPOINT) -> subprocess.CompletedProcess:
    cmd = ["bash", str(entrypoint), *(argv or ("echo", "command-ran"))]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    full = {"PATH": os.environ["PATH"], "HOME": "/root", **env}
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=30)


def test_cpu_image_skips_the_gpu_checks():
    proc = run({"ROCMFT_IMAGE_ARCH": "cpu", "ROCMFT_CHECK_ROOT": "/nonexistent"})
    assert proc.returncode == 0 and proc.stdout.strip() == "command-ran"


def test_skip_variable_is_the_escape_hatch():
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": "/nonexistent", "ROCMFT_SKIP_GPU_CHECK": "1"})
    assert proc.returncode == 0 and "command-ran" in proc.stdout


def test_no_devices_prints_a_fix_for_each(tmp_path):
    root = fake_root(tmp_path, [], kfd=False)
    shutil.rmtree(root / "dev" / "dri")
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": str(root)})
    assert proc.returncode == 2 and "command-ran" not in proc.stdout
    assert "/dev/kfd is missing" in proc.stderr and "--device=/dev/kfd" in proc.stderr
    assert "/dev/dri is missing" in proc.stderr and "--device=/dev/dri" in proc.stderr
    assert "ROCMFT_SKIP_GPU_CHECK=1" in proc.stderr


def test_matching_gpus_pass(tmp_path):
    root = fake_root(tmp_path, [90402, 90402])
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": str(root)}, "echo", "training")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "training"


@pytest.mark.parametrize("version, name", [(90010, "gfx90a"), (90500, "gfx950"), (110000, "gfx1100"),
                                           (110001, "gfx1101"), (120001, "gfx1201")])
def test_gfx_target_versions_decode(tmp_path, version, name):
    root = fake_root(tmp_path, [version])
    assert run({"ROCMFT_IMAGE_ARCH": name, "ROCMFT_CHECK_ROOT": str(root)}).returncode == 0


def test_wrong_arch_says_which_image_to_use(tmp_path):
    root = fake_root(tmp_path, [110000])
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": str(root), "ROCMFT_ARCHES": TABLE})
    assert proc.returncode == 2
    assert "a visible GPU is gfx1100, this image is built for gfx942" in proc.stderr
    assert "make image ARCH=gfx1100" in proc.stderr


def test_render_nodes_missing(tmp_path):
    root = fake_root(tmp_path, [90402], render=False)
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": str(root)})
    assert proc.returncode == 2 and "no renderD* nodes" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to act as another user")
def test_group_access_names_the_gid():
    # Outside pytest's 0700 tmp folders, so that the unprivileged user can reach the tree; and the script itself is
    # copied there: a checkout under a 0700 home (root's, a private one) is out of that user's reach.
    base = Path(tempfile.mkdtemp(prefix="rocmft-entrypoint-", dir="/tmp"))
    try:
        _group_access(base)
    finally:
        shutil.rmtree(base)


def _group_access(base: Path) -> None:
    root = fake_root(base, [90402])
    entrypoint = Path(shutil.copy(ENTRYPOINT, base / "entrypoint.sh"))
    for path in (base, root, entrypoint, *root.rglob("*")):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chown(root / "dev" / "kfd", 0, 44)
    os.chown(root / "dev" / "dri" / "renderD128", 0, 109)
    (root / "dev" / "kfd").chmod(0o660)
    (root / "dev" / "dri" / "renderD128").chmod(0o660)
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_CHECK_ROOT": str(root)}, user="65534", entrypoint=entrypoint)
    assert proc.returncode == 2, proc.stderr
    assert "--group-add 44" in proc.stderr and "--group-add 109" in proc.stderr
    assert "--group-add video --group-add render" in proc.stderr


def test_default_command_is_the_self_check_report():
    text = ENTRYPOINT.read_text()
    assert 'set -- python -m rocmft.image.selfcheck --show /opt/rocmft/selfcheck.json' in text
    assert subprocess.run(["bash", "-n", str(ENTRYPOINT)]).returncode == 0


def igpu_root(tmp_path: Path, *, igpu_node: bool) -> Path:
    """An RX 7900 XTX host with the Ryzen iGPU: sysfs (not namespaced) lists both; /dev/dri holds the
    gfx1100's render node, and the iGPU's only when the whole of /dev/dri was passed."""
    root = fake_root(tmp_path, [])
    nodes = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for i, (version, minor) in enumerate([(100306, 129), (110000, 128)], start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(f"simd_count 4\ngfx_target_version {version}\n"
                                                  f"drm_render_minor {minor}\n")
    if igpu_node:
        (root / "dev" / "dri" / "renderD129").write_text("")
    return root


def test_an_igpu_whose_render_node_is_not_in_the_container_is_not_counted(tmp_path):
    """What `make train` gives the container (the gfx1100's render node alone) passes the check."""
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx1100", "ROCMFT_CHECK_ROOT": str(igpu_root(tmp_path, igpu_node=False)),
                "ROCMFT_ARCHES": TABLE})
    assert proc.returncode == 0, proc.stderr


def test_a_visible_igpu_is_never_suggested_as_an_image_arch(tmp_path):
    """All of /dev/dri passed by hand: the iGPU is reported, with the fix that works (its render nodes), never
    `make image ARCH=gfx1036` (no such arch in docker/arches.yaml) nor ROCR_VISIBLE_DEVICES (make train unsets it)."""
    proc = run({"ROCMFT_IMAGE_ARCH": "gfx1100", "ROCMFT_CHECK_ROOT": str(igpu_root(tmp_path, igpu_node=True)),
                "ROCMFT_ARCHES": TABLE})
    assert proc.returncode == 2
    assert "a visible GPU is gfx1036, which rocmft builds no image for" in proc.stderr
    assert "ARCH=gfx1036" not in proc.stderr and "ROCR_VISIBLE_DEVICES" not in proc.stderr
    assert "--device=/dev/dri/renderD<N> per gfx1100 GPU" in proc.stderr
