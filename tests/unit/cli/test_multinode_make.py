"""`make train RUNTIME=slurm|k8s`: each multi-node variable becomes its CLI option (recorder of conftest.py)."""

from __future__ import annotations


def test_make_passes_the_multinode_variables_to_the_cli(job_env, recorder):
    argv = recorder.last("train", "RECIPE=tiny-cpu", "RUNTIME=slurm", "NODES=2", "PARTITION=p1", "ACCOUNT=a1",
                         "TIME=00:10:00", "CONTAINER=none", "SUBMIT=0", "WAIT=1", "SBATCH_ARGS=--qos=high --constraint=x",
                         "SIF=/s/x.sif", "CONTAINER_IMAGE=reg/img:1", "K8S_PVC=pv", "K8S_NAMESPACE=ns", "K8S_SECRET=sec",
                         env=job_env)
    assert argv[:2] == ["train", "tiny-cpu"]
    for option in ("--runtime=slurm", "--nodes=2", "--partition=p1", "--account=a1", "--time=00:10:00",
                   "--container=none", "--sif=/s/x.sif", "--sbatch-args=--qos=high --constraint=x",
                   "--container-image=reg/img:1", "--k8s-namespace=ns", "--k8s-pvc=pv", "--k8s-secret=sec",
                   "--no-submit", "--wait"):
        assert option in argv
    # unset variables add nothing: the CLI's defaults apply
    assert recorder.last("train", "RECIPE=tiny-cpu", env=job_env) == ["train", "tiny-cpu"]
