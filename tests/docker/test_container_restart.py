"""RUNTIME=docker: a rank killed inside the container is restarted by torchrun in the same container, and the
run resumes from its newest complete checkpoint and finishes (the CPU image, a real daemon; `pytest -m docker`).

The rank is found from the host by its environment (/proc/<pid>/environ: LOCAL_RANK and the run dir) and
killed with SIGKILL, as the kernel's OOM killer would. Both starts of the ranks must report the same host:
the container's, so nothing was started anew outside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, offline_env
from tests.docker.test_container_train import client, containers_of, cpu_image  # noqa: F401 - fixtures
from tests.train.test_faults_cpu import _find_rank, _logged, _wait_for_step

pytestmark = pytest.mark.docker
STEPS, SAVE = 30, 4


def test_a_killed_rank_is_restarted_inside_the_one_container(client, cpu_image, tiny_model, tmp_path):  # noqa: F811
    from rocmft.run import events

    run = tmp_path / "runs" / "docker-restart"
    image = os.environ.get("ROCMFT_TEST_CPU_IMAGE") or cpu_image.tags[0]  # a locally built variant, if given
    proc = subprocess.Popen([sys.executable, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "docker",
                             "--docker-image", image, "--run-name", run.name, "--no-plan", "gpus_per_node=2",
                             f"max_steps={STEPS}", f"save_steps={SAVE}", "resilience.max_restarts=1"],
                            cwd=ROOT, env=offline_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        _wait_for_step(run, 6, proc)
        [container] = containers_of(client, run)
        reached = max(e["step"] for e in _logged(run))
        os.kill(_find_rank(run, "1"), signal.SIGKILL)
        killed = time.time()
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in containers_of(client, run):
            c.remove(force=True)
    assert proc.returncode == 0, out[-4000:]
    found = events.read(run)
    first, second = events.segments(found)
    assert first["begin"]["host"] == second["begin"]["host"] == container.id[:12]  # the same container
    assert second["begin"]["restart"] == 1
    start = second["begin"]["start_step"]
    assert start % SAVE == 0 and 0 < start <= max(reached, first["steps"][-1]["step"])
    assert [e["step"] for e in events.steps(found)] == list(range(1, STEPS + 1))
    assert [e["step"] for e in second["steps"]] == list(range(start + 1, STEPS + 1))
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "succeeded" and status["attempts"][0]["restarts"] == 1
    assert json.loads((run / "output" / "trainer_state.json").read_text())["global_step"] == STEPS
    print(f"rank 1 killed at step ~{reached}; resumed from {start}; first step again "
          f"{second['steps'][0]['time'] - killed:.1f} s after the kill")
