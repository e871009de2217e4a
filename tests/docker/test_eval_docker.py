"""`make eval RUNTIME=docker` for real: a copy of the session's tiny-cpu run evaluated in the CPU image (its
training stack, with LLaMA-Factory's metrics extra from requirements/train.txt), the run dir read-only inside:
the host writes eval.json from the job's stdout. The same numbers as in the venv: its losses on the held-out rows
(eval_loss, over every held-out row whatever N) are compared with the venv's eval.json of the same run (the
session's `evaluated_run`, tests/conftest.py).

Needs a daemon and the CPU image built from this checkout's requirements (`make wheelhouse ARCH=cpu && make
image ARCH=cpu OFFLINE=1`); skipped only when no daemon is configured.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import ROOT, TrainedRun, make_env, rocmft
from tests.docker.test_container_train import client, cpu_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def eval_containers(client, run) -> list:  # noqa: F811
    return [c for c in client.containers.list(all=True, ignore_removed=True, filters={"label": "ai.rocmft.serve=eval"})
            if any(str(m.get("Source", "")).startswith(str(run)) for m in c.attrs.get("Mounts") or [])]


def test_make_eval_in_the_container(trained_run: TrainedRun, evaluated_run, client, cpu_image, tmp_path):  # noqa: F811
    env = make_env(tmp_path)
    run = trained_run.copy_to(tmp_path / "runs", "in-docker")
    proc = subprocess.run(["make", "-s", "eval", f"RUN={run}", "RUNTIME=docker", "N=4"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    try:
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "on held-out rows (docker)" in proc.stdout
        report = json.loads((run / "eval.json").read_text())
        assert report["tuned"]["eval_loss"] < report["base"]["eval_loss"]
        assert report["tuned"]["generated_rows"] == 4 and isinstance(report["tuned"]["bleu-4"], float)
        venv = json.loads((evaluated_run[0] / "eval.json").read_text())  # the same run, evaluated in the venv
        for side in ("base", "tuned"):  # over all held-out rows, whatever N: the same stack, the same numbers
            assert report[side]["eval_loss"] == pytest.approx(venv[side]["eval_loss"], rel=1e-3), (side, report, venv)
        assert eval_containers(client, run) == []  # removed by the launcher
    finally:
        for container in eval_containers(client, run):
            container.remove(force=True)


def test_make_eval_tasks_in_the_container(demo_run: TrainedRun, harness_evaluated_demo, client, cpu_image,  # noqa: F811
                                          tmp_path):
    """`make eval TASKS=rocmft_demo RUNTIME=docker`: lm-evaluation-harness from the CPU image on a copy of the demo
    run; every task, metric, row count, score and standard error as in the venv (the session's
    harness_evaluated_demo). The same numbers, not numbers within an error: the image holds the lock's packages,
    and the job is handed the same batch size (harness_plan.CPU_BATCH), dtype (fp32 on CPU) and greedy decoding,
    so a difference is a different stack or plan, not noise."""
    env = make_env(tmp_path)
    run = demo_run.copy_to(tmp_path / "runs", "harness-in-docker")
    proc = subprocess.run(["make", "-s", "eval", f"RUN={run}", "RUNTIME=docker", "TASKS=rocmft_demo"], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                          check=False)
    try:
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "lm-evaluation-harness rocmft_demo" in proc.stdout and "(docker)" in proc.stdout
        rows = {(r["task"], r["metric"]): r for r in json.loads((run / "eval.json").read_text())["harness"]["rows"]}
        venv = {(r["task"], r["metric"]): r
                for r in json.loads((harness_evaluated_demo[0] / "eval.json").read_text())["harness"]["rows"]}
        assert rows.keys() == venv.keys()
        for key, row in rows.items():
            other = venv[key]
            same = ("n", "base", "tuned", "base_stderr", "tuned_stderr", "diff", "within_noise")
            assert {k: row[k] for k in same} == {k: other[k] for k in same}, (key, row, other)
        assert rows[("rocmft_demo_identity", "exact_match")]["within_noise"] is False
        assert eval_containers(client, run) == []
    finally:
        for container in eval_containers(client, run):
            container.remove(force=True)


@pytest.mark.parametrize("tasks", [[], ["--tasks", "rocmft_demo"]], ids=["held-out", "harness"])
def test_a_missing_image_is_one_line_exit_2_and_nothing_starts(client, tmp_path, tasks):  # noqa: F811
    """Both reports, RUNTIME=docker with an image the real daemon lacks: one line naming the build command, exit 2,
    no container, no eval.json (a run dir written by hand: nothing may load it)."""
    from tests.unit.run.conftest import make_run

    run = make_run(tmp_path / "runs", "no-image", runtime="docker", val_size=0.1)
    proc = rocmft("eval", str(run), "--runtime", "docker", "--image", "rocmft:no-such-image", *tasks,
                  env=make_env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: image: image rocmft:no-such-image is not present locally (rocmft never pulls) "
                      "(build it: `make image ARCH=cpu OFFLINE=1` (no registry needed))"], proc.stderr
    assert eval_containers(client, run) == [] and not (run / "eval.json").exists()
