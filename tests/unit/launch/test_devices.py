"""A run is handed only the GPUs it uses, and a run asking for GPUs a live run holds is refused before launch
(launch/devices.py). The host's GPUs are data (hardware/host.py GPU); no GPU here, so the launch plans and
containers are tested as data. What a run holds is read from real run dirs (pipeline.prepare + the commit every
runtime does), held by a real live process, and released when it dies."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from rocmft import pipeline
from rocmft.hardware import arches
from rocmft.hardware.host import GPU
from rocmft.launch import devices, prepared
from rocmft.launch import docker as rt
from rocmft.run import runs
from tests.unit.launch.test_docker_spec import mi300x_node

A = arches.table()
NODE = mi300x_node().gpus  # 8 x gfx942, render nodes renderD128..135
HOST = socket.gethostname()


def test_host_data_a_one_gpu_recipe_on_an_8_gpu_node_gets_the_first_gpu_of_its_arch():
    assert devices.default_selection(A["gfx942"], NODE, 1) == ("0",)
    assert devices.default_selection(A["gfx942"], NODE, 8) == tuple(str(i) for i in range(8))
    # a Ryzen iGPU (gfx1036) listed first is skipped: the first GPU *of the arch*
    mixed = (GPU(0, "gfx1036"), GPU(1, "gfx1100"), GPU(2, "gfx1100"))
    assert devices.default_selection(A["gfx1100"], mixed, 1) == ("1",)
    # too few of the arch, or the CPU arch: no selection (the runtime's host check says what is missing)
    assert devices.default_selection(A["gfx942"], NODE[:2], 8) is None
    assert devices.default_selection(A["cpu"], NODE, 1) is None


def _prep(tmp_path, monkeypatch, recipe="llama3-8b-lora", gpus=None, run_name=None):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return pipeline.prepare(recipe, gpus=gpus, run_name=run_name, validate=False, env={})


def test_plan_data_the_job_sees_only_its_gpus_local_and_docker(tmp_path, monkeypatch):
    prep = _prep(tmp_path, monkeypatch)  # llama3-8b-lora: one process
    plan = prepared.build_plan(prep, python="python", gpus=devices.choose(prep, NODE))
    assert plan.visible_devices == ("0",) and plan.env["ROCR_VISIBLE_DEVICES"] == "0"  # RUNTIME=local
    spec = rt.container_spec(plan, A["gfx942"], mi300x_node(), image="rocmft:gfx942")
    assert spec.devices == ("/dev/kfd", "/dev/dri/renderD128")  # one render node, not the node's eight
    assert "ROCR_VISIBLE_DEVICES" not in spec.environment  # in there, the one GPU is GPU 0
    # GPUS= still decides
    chosen = _prep(tmp_path, monkeypatch, gpus="5")
    assert devices.choose(chosen, NODE) == ("5",)


def _committed(tmp_path, monkeypatch, gpus, name):
    """A real run dir as every runtime writes it (plan.json with its GPUs), then marked running on this host."""
    prep = _prep(tmp_path, monkeypatch, gpus=gpus, run_name=name)
    plan = prepared.build_plan(prep, python="python", gpus=devices.choose(prep, NODE))
    return prepared.commit(prep, plan, runtime="local"), plan


@pytest.fixture
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_real_run_dirs_a_live_run_holds_its_gpus_and_a_dead_one_nothing(tmp_path, monkeypatch, live_pid):
    first, _ = _committed(tmp_path, monkeypatch, "0,1", "first")
    runs.mark(first, "running", runtime="local", launcher_pid=live_pid.pid, host=HOST)
    prep = _prep(tmp_path, monkeypatch, gpus="1,2")
    second = prepared.build_plan(prep, python="python", gpus=devices.choose(prep, NODE))
    [problem] = devices.check(second, A["gfx942"], NODE)
    assert problem.line() == (f"error: GPUS: GPU 1 is in use by run {runs.relative(first)} (pid {live_pid.pid}) "
                              "(GPUS=2,3 is free; or wait for that run to end (`make runs`))")
    # the default selection of a one-GPU run (GPU 0) collides too, and is pointed at a free one
    solo = prepared.build_plan(_prep(tmp_path, monkeypatch), python="python", gpus=("0",))
    assert "GPUS=2 is free" in devices.check(solo, A["gfx942"], NODE)[0].line()
    # its process gone (killed: no status written), it holds nothing
    live_pid.kill()
    live_pid.wait()
    assert devices.check(second, A["gfx942"], NODE) == []


def test_real_run_dirs_only_running_runs_of_this_host_hold(tmp_path, monkeypatch, live_pid):
    ended, plan = _committed(tmp_path, monkeypatch, "0", "ended")
    runs.mark(ended, "running", runtime="local", launcher_pid=live_pid.pid, host=HOST)
    runs.mark(ended, "succeeded", exit_code=0)
    other, _ = _committed(tmp_path, monkeypatch, "0", "other-host")
    runs.mark(other, "running", runtime="local", launcher_pid=live_pid.pid, host=HOST + "-elsewhere")
    _committed(tmp_path, monkeypatch, "0", "only-rendered")  # a dry run: never started
    assert devices.check(plan, A["gfx942"], NODE) == []


def test_real_run_dirs_a_docker_run_whose_launcher_died_holds_while_its_container_is_there(tmp_path, monkeypatch):
    run_dir, plan = _committed(tmp_path, monkeypatch, "3", "orphan")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    runs.mark(run_dir, "running", runtime="docker", container="rocmft-orphan", launcher_pid=dead.pid, host=HOST)
    assert devices.check(plan, A["gfx942"], NODE) == []  # the daemon not asked: judged by its launcher alone
    # the daemon's label spells the run dir another way (the runs folder reached through a link): the same run
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    listed = {str(tmp_path / "link" / run_dir.name): ("rocmft-orphan", "running")}
    assert [h.how for h in devices.holders(NODE, containers=listed)] == ["container rocmft-orphan, its launcher gone"]
    # the daemon's list (left_behind.labelled) as data: the container keeps running after its launcher
    listed = {str(run_dir): ("rocmft-orphan", "running")}
    [problem] = devices.check(plan, A["gfx942"], NODE, containers=listed)
    assert "GPU 3 is in use by run" in problem.message and "container rocmft-orphan, its launcher gone" in problem.message
    assert devices.check(plan, A["gfx942"], NODE, containers={str(run_dir): ("rocmft-orphan", "exited")}) == []


def test_status_data_a_plan_naming_no_gpus_holds_every_gpu_of_its_arch():
    mixed = (GPU(0, "gfx1036"), GPU(1, "gfx1100"), GPU(2, "gfx1100"))
    status = {"state": "running", "host": "h", "launcher_pid": 7, "arch": "gfx1100"}

    def held(plan, **kw):
        # pid 1 lives too: os.kill(True, 0) asks about pid 1, so a launcher_pid of true must never reach alive()
        return devices.holder("runs/r", {**status, **kw}, plan, hostname="h", alive=lambda pid: pid in (1, 7),
                              container=None, arch_gpus=lambda gfx: tuple(str(g.index) for g in mixed if g.gfx == gfx))

    assert held({"visible_devices": None, "arch": "gfx1100"}) == devices.Holder("runs/r", ("1", "2"), "pid 7")
    assert held({"visible_devices": ["2"]}).gpus == ("2",)
    assert held({"visible_devices": ["2"]}, launcher_pid=8) is None  # dead
    assert held({"visible_devices": ["2"]}, launcher_pid=True) is None  # not a pid
    assert held({"visible_devices": ["2"]}, state="interrupted") is None


def test_too_few_free_gpus_says_so_instead_of_naming_a_selection():
    holders = [devices.Holder("runs/big", tuple(str(i) for i in range(7)), "pid 1")]
    [problem] = devices.busy(("0", "1"), 2, A["gfx942"], NODE, holders)
    assert problem.message == "GPU 0,1 are in use by run runs/big (pid 1)"
    assert problem.suggestion == "1 gfx942 GPU(s) free (7), the run needs 2: wait for that run to end, or stop it (`make runs`)"
    # exactly as many free as the run needs: that selection is named
    [problem] = devices.busy(("0",), 1, A["gfx942"], NODE, holders)
    assert problem.suggestion == "GPUS=7 is free; or wait for that run to end (`make runs`)"


def test_real_run_dirs_a_plan_naming_no_gpus_holds_only_the_gpus_of_its_arch(tmp_path, monkeypatch, live_pid):
    """A run dir from before the rule (its plan.json names no GPUs) on a host with GPUs of two arches."""
    run_dir, _ = _committed(tmp_path, monkeypatch, "0", "before-the-rule")
    plan = json.loads((run_dir / "plan.json").read_text())
    del plan["visible_devices"]
    (run_dir / "plan.json").write_text(json.dumps(plan))
    runs.mark(run_dir, "running", runtime="local", launcher_pid=live_pid.pid, host=HOST)
    host = (*NODE[:2], GPU(2, "gfx1100"))
    assert [h.gpus for h in devices.holders(host)] == [("0", "1")]
