"""Inputs never become commands in the sbatch script or the PyTorchJob: each attack of issue 26, performed.

Names that become script or manifest text are refused before anything is rendered (one line each, exit 2,
no run dir); values are quoted for the shell that reads them, proven by running the rendered lines in a real
bash with a program that records its argv in place of apptainer/docker (neither runs on CI).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import yaml

from rocmft import pipeline
from rocmft.launch import slurm
from tests.conftest import ROOT, rocmft


def refused(proc, env) -> list[str]:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not Path(env["ROCMFT_RUNS"]).exists(), "a run dir was created"
    return proc.stderr.strip().splitlines()


def recipe_file(tmp_path, text: str) -> str:
    path = tmp_path / "attack.yaml"
    path.write_text("base: tiny-cpu\n" + text)
    return str(path)


def test_an_env_key_that_is_a_command_is_refused_before_rendering(tmp_path, job_env):
    side = tmp_path / "PWNED"
    recipe = recipe_file(tmp_path, f'env:\n  "X=1; touch {side} #": "1"\n  OK_NAME: "fine"\n')
    for runtime in ("slurm", "k8s"):
        lines = refused(rocmft("train", recipe, "--runtime", runtime, "--no-submit", env=job_env), job_env)
        assert lines == [f"error: {recipe}: env.'X=1; touch {side} #': not an environment variable name "
                         "(letters, digits and _, not starting with a digit)"]
    assert not side.exists()


def test_newlines_in_slurm_options_are_refused_one_line_each(job_env):
    proc = rocmft("train", "tiny-cpu", "--runtime", "slurm", "--no-submit", "--partition", "debug\n#SBATCH --uid=0",
                  "--account", "proj\nrm -rf ~", "--sbatch-args", "--qos=high\n#SBATCH --uid=0", "--sif", "/s/x\n.sif",
                  env=job_env)
    lines = refused(proc, job_env)
    assert [ln.split(":")[1].strip() for ln in lines] == ["SBATCH_ARGS", "PARTITION", "ACCOUNT", "SIF"]
    assert all("holds a control character" in ln and "\\n" in ln for ln in lines)


def test_a_partition_that_is_not_a_slurm_name_is_refused(job_env):
    lines = refused(rocmft("train", "tiny-cpu", "--runtime", "slurm", "--no-submit", "--partition", "debug --uid=0",
                           env=job_env), job_env)
    assert lines == ["error: PARTITION: `debug --uid=0` is not a Slurm name (letters, digits, _.+-)"]


def test_yaml_documents_in_kubernetes_names_are_refused_one_line_each(job_env):
    document = "ml\n---\napiVersion: v1\nkind: Pod"
    proc = rocmft("train", "tiny-cpu", "--runtime", "k8s", "--no-submit", "--k8s-namespace", document,
                  "--k8s-pvc", "data: {x: 1}", "--k8s-secret", "s\n---", "--container-image", "img:1 # x", env=job_env)
    lines = refused(proc, job_env)
    assert [ln.split(":")[1].strip() for ln in lines] == ["K8S_NAMESPACE", "K8S_PVC", "K8S_SECRET", "CONTAINER_IMAGE"]
    # a namespace that is a valid name but too long for a DNS label
    lines = refused(rocmft("train", "tiny-cpu", "--runtime", "k8s", "--k8s-namespace", "a" * 64, env=job_env), job_env)
    assert len(lines) == 1 and "K8S_NAMESPACE" in lines[0]


def test_kubernetes_names_that_fit_render_as_data(job_env):
    proc = rocmft("train", "tiny-cpu", "--runtime", "k8s", "--no-submit", "--k8s-namespace", "ml-team",
                  "--k8s-pvc", "team.rwx", "--k8s-secret", "hf-token", "--run-name", "k8s-names", env=job_env)
    assert proc.returncode == 0, proc.stderr
    text = (Path(job_env["ROCMFT_RUNS"]) / "k8s-names" / "pytorchjob.yaml").read_text()
    [job] = [d for d in yaml.safe_load_all(text) if d]
    assert job["metadata"]["namespace"] == "ml-team"


def _recording(tmp_path, name: str) -> tuple[Path, Path]:
    """A program called NAME on PATH that writes its argv, one per line, and exits 0."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    log = tmp_path / f"{name}.argv"
    program = folder / name
    program.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {shlex.quote(str(log))}\n')
    program.chmod(0o755)
    return folder, log


def _script(tmp_path, monkeypatch, runs: Path, **options) -> str:
    import argparse

    monkeypatch.setenv("ROCMFT_RUNS", str(runs))
    prep = pipeline.prepare("tiny-cpu", [], nodes=2, run_name="dollar", validate=False, env={})
    base = dict(container=None, sif=None, partition=None, account=None, time_limit=None, sbatch_args="",
                container_image=None, submit=False, wait=False, gpus=None)
    opts = slurm.options_from_args(argparse.Namespace(**{**base, **options}), prep.arch, ROOT)
    plan = pipeline.build_plan(prep, python="python", env={}, node_rank="$SLURM_NODEID", master_addr="$MASTER_ADDR",
                               master_port="$MASTER_PORT")
    return slurm.render_script(plan, prep.recipe, prep.arch, opts, root=ROOT, run_dir=Path(prep.run_dir), python="python")


def test_dollar_paren_in_paths_stays_text_in_a_real_bash(tmp_path, monkeypatch):
    """A SIF path and a runs dir holding `$(touch ...)`: the bookkeeping lines run in bash with a recording
    apptainer/docker; each path arrives as one argument, byte for byte, and nothing ran."""
    side = tmp_path / "PWNED"
    runs = tmp_path / f"$(touch {side})" / "runs"
    sif = f"/shared/$(touch {side}).sif"
    for container, options in (("apptainer", {"sif": sif}), ("docker", {"container_image": "reg/img:1"})):
        text = _script(tmp_path, monkeypatch, runs, container=container, **options)
        book = [ln for ln in text.splitlines() if ln.startswith(container)][0].split(" started ")[0]
        folder, log = _recording(tmp_path, container)
        subprocess.run(["bash", "-c", book], env={"PATH": f"{folder}:{os.environ['PATH']}"}, check=True)
        argv = log.read_text().splitlines()
        assert not side.exists(), book
        binds = [a for a in argv if str(runs.parent) in a]
        assert binds and all(a.count(str(runs.parent)) == 2 for a in binds)  # `path:path`, literal
        if container == "apptainer":
            assert sif in argv
        assert f"RUN_DIR={shlex.quote(str(runs / 'dollar'))}" in text
