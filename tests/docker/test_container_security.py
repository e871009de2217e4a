"""What a process inside a rocmft container can do, on a real Docker daemon with the CPU image (issue 26).

- The container a training run gets (`container_spec`, as `make train RUNTIME=docker` builds it) cannot write
  the checkout (Makefile, .git, src/, .venv), and can write its run dir, as the invoking user.
- GPU containers keep Docker's default seccomp profile with CAP_SYS_NICE: the NUMA memory-policy calls ROCr
  makes go through, and the profile still refuses them to a container without it (so it is on, not
  `unconfined`). No GPU here: the GPU spec's security settings are applied to a CPU-image container.
"""

from __future__ import annotations

import json
import os

import pytest

from rocmft import arches, host, pipeline
from rocmft.launch import docker as rt
from tests.conftest import ROOT
from tests.docker.test_container_train import TEST_UID, client, cpu_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker
A = arches.table()

PROBE = r"""
import json, os, sys
root, run_dir = sys.argv[1], sys.argv[2]
result = {}
for rel in ("Makefile", ".git", ".git/config", "src/rocmft/__init__.py", ".venv/bin/python", "planted.py"):
    path = os.path.join(root, rel)
    if rel != "planted.py" and not os.path.exists(path):
        continue
    try:
        if os.path.isdir(path):
            open(os.path.join(path, "planted"), "w").close()
        else:
            open(path, "a").close()
        result[rel] = "written"
    except OSError as exc:
        result[rel] = exc.strerror
open(os.path.join(run_dir, "probe.txt"), "w").write("from inside\n")
print(json.dumps(result))
"""


def run_probe(client, spec, command) -> tuple[int, str]:  # noqa: F811
    """The spec's container (devices, mounts, user, capabilities) running `command` instead."""
    import dataclasses

    run_probe.count = getattr(run_probe, "count", 0) + 1
    probe = dataclasses.replace(spec, command=tuple(command), name=f"rocmft-probe-{os.getpid()}-{run_probe.count}")
    container = client.containers.create(**rt.sdk_kwargs(probe, {}))
    try:
        container.start()
        code = container.wait(timeout=120)["StatusCode"]
        return code, container.logs().decode()
    finally:
        container.remove(force=True)


def training_spec(tmp_path, monkeypatch, as_uid: int | None = None):
    """The spec `make train RUNTIME=docker` builds for the invoking user, or (`as_uid`, run as root) for a
    launch by that user, whose run dir it owns."""
    import dataclasses

    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = pipeline.prepare("tiny-cpu", [], run_name="probe", validate=False, env={})
    plan = pipeline.build_plan(prep, python="python", env={})
    facts = host.gather(tools=False)
    if as_uid is not None:
        facts = dataclasses.replace(facts, uid=as_uid, gid=as_uid)
    spec = rt.container_spec(plan, A["cpu"], facts, image="rocmft:cpu")
    prep.run_dir.mkdir(parents=True)
    if as_uid is not None:
        os.chown(prep.run_dir, as_uid, as_uid)
    assert not rt.check_mounts(spec) and not rt.create_cache_dirs(spec)
    return spec, prep.run_dir


def test_a_training_container_cannot_write_the_checkout_and_writes_its_run_dir(client, cpu_image, tmp_path,  # noqa: F811
                                                                                  monkeypatch):
    spec, run_dir = training_spec(tmp_path, monkeypatch)
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "Makefile", ROOT / "src" / "rocmft" / "__init__.py")}
    code, out = run_probe(client, spec, ["python", "-c", PROBE, str(ROOT), str(run_dir)])
    assert code == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result and all(v == "Read-only file system" for v in result.values()), result
    assert {"Makefile", "src/rocmft/__init__.py", "planted.py"} <= set(result)
    assert not (ROOT / "planted.py").exists()
    assert {p: p.stat().st_mtime_ns for p in before} == before
    probe = run_dir / "probe.txt"
    assert probe.read_text() == "from inside\n"
    assert (probe.stat().st_uid, probe.stat().st_gid) == (os.getuid(), os.getgid())  # the invoking user
    if os.getuid() == 0:  # root invoking proves nothing about the user: a launch by TEST_UID writes as TEST_UID
        user_spec, user_run = training_spec(tmp_path / "as-user", monkeypatch, as_uid=TEST_UID)
        code, out = run_probe(client, user_spec, ["python", "-c", f"open({str(user_run / 'probe.txt')!r}, 'w')"])
        assert code == 0, out
        written = (user_run / "probe.txt").stat()
        assert user_spec.user == f"{TEST_UID}:{TEST_UID}" and (written.st_uid, written.st_gid) == (TEST_UID, TEST_UID)


def _mempolicy_probe(client, spec):  # noqa: F811
    code, out = run_probe(client, spec, ["python", "-c", (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.syscall(239, None, None, 0, None, 0); "  # get_mempolicy on x86_64
        "print('get_mempolicy', r, os.strerror(ctypes.get_errno()) if r else 'ok')")])
    assert code == 0, out
    return out.strip().splitlines()[-1]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the syscall number used is x86_64's")
def test_gpu_containers_keep_dockers_seccomp_profile_with_the_numa_calls(client, cpu_image, tmp_path, monkeypatch):  # noqa: F811
    cpu, _ = training_spec(tmp_path, monkeypatch)
    assert cpu.cap_add == () and _mempolicy_probe(client, cpu) == "get_mempolicy -1 Operation not permitted"
    # the gfx942 spec's security settings (no devices: there is no GPU here)
    gfx = rt.container_spec(pipeline.build_plan(pipeline.prepare("tiny-cpu", ["arch=gfx942"], run_name="gfx",
                                                                 validate=False, env={}), python="python", env={}),
                            A["gfx942"], host.gather(tools=False), image="rocmft:cpu")
    assert gfx.cap_add == ("SYS_NICE",) and gfx.ipc_mode == "host"
    import dataclasses

    numa = dataclasses.replace(cpu, cap_add=gfx.cap_add)
    assert _mempolicy_probe(client, numa) == "get_mempolicy 0 ok"
    assert "security_opt" not in rt.sdk_kwargs(numa, {})
