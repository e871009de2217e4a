"""RUNTIME=k8s as data: the Kubeflow PyTorchJob for 2 x 8 gfx942, validated offline.

The pod templates are checked against the core Kubernetes Pod schema (kubernetes-validate, strict: unknown
fields fail); the PyTorchJob itself, whose CRD schema kubernetes-validate does not know, by what the training
operator needs of it (structure_problems). No cluster, no kubectl.
"""

from __future__ import annotations

import argparse
import json

import kubernetes_validate
import pytest
import yaml

from rocmft import __version__, pipeline
from rocmft.io import paths
from rocmft.launch import k8s

ROOT = paths.root()
K8S_VERSION = "1.30.0"


def prepared(recipe="llama3-8b-z3", nodes=2, overrides=(), run_name="test-k8s-pinned"):
    return pipeline.prepare(recipe, list(overrides), nodes=nodes, run_name=run_name, validate=False, env={})


def job_for(prep, env=None, **kw):
    plan = pipeline.build_plan(prep, python="python", env=env or {}, node_rank="$(RANK)", master_addr="$(MASTER_ADDR)",
                               master_port="$(MASTER_PORT)")
    options = dict(name=k8s.job_name(prep.run_dir.name), run_name=prep.run_dir.name, image="reg.example/rocmft:0.1.0-gfx942",
                   pvc="rocmft", secret="rocmft-secrets", namespace="ml", deadline_s=4 * 3600, root=ROOT)
    options.update(kw)
    job, dropped = k8s.build_job(plan, prep.recipe, prep.arch, **options)
    return job, plan, dropped


SUBMIT_ENV = {"HF_TOKEN": "hf_TOPSECRET_value", "TORCH_EXTENSIONS_DIR": str(ROOT / ".cache" / "torch_extensions"),
              "HF_HOME": "/home/someone/.cache/huggingface", "NCCL_SOCKET_IFNAME": "eth0"}


def test_2x8_gfx942_pytorchjob_structure():
    job, plan, _ = job_for(prepared(), env=SUBMIT_ENV)
    assert k8s.structure_problems(job, nodes=2, nproc=8) == []
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    assert job["metadata"] == {"name": "rocmft-test-k8s-pinned", "namespace": "ml", "labels": job["metadata"]["labels"]}
    spec = job["spec"]
    assert spec["nprocPerNode"] == "8"
    assert spec["runPolicy"] == {"backoffLimit": 0, "cleanPodPolicy": "None", "activeDeadlineSeconds": 14400}
    replicas = spec["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Master": 1, "Worker": 1}
    assert all(v["restartPolicy"] == "Never" for v in replicas.values())
    assert replicas["Master"]["template"] == replicas["Worker"]["template"]
    [container] = replicas["Master"]["template"]["spec"]["containers"]
    assert container["name"] == "pytorch" and container["image"] == "reg.example/rocmft:0.1.0-gfx942"
    assert container["command"] == ["python", "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "$(RANK)",
                                    "--nproc_per_node", "8", "--master_addr", "$(MASTER_ADDR)",
                                    "--master_port", "$(MASTER_PORT)", "--max_restarts", "2",
                                    "--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", "-m", "rocmft.worker",
                                    "--run-dir", "runs/test-k8s-pinned"]
    assert container["command"] == list(plan.argv)  # the plan's argv, nothing else
    assert container["resources"] == {"limits": {"amd.com/gpu": 8}}
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
    assert container["workingDir"] == "/workspace"
    volumes = {v["name"]: v for v in replicas["Master"]["template"]["spec"]["volumes"]}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    assert volumes["project"]["persistentVolumeClaim"] == {"claimName": "rocmft"}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/workspace", "/dev/shm"}


def test_env_from_the_plan_with_secrets_only_as_secret_references():
    job, _, dropped = job_for(prepared(), env=SUBMIT_ENV)
    text = json.dumps(job)
    assert "hf_TOPSECRET_value" not in text
    env = {e["name"]: e for e in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "rocmft-secrets",
                                                                                 "key": "HF_TOKEN", "optional": True}}}
    # Multi-node: AMD's full-single-node NCCL_MIN_NCHANNELS=112 is not applied (issue 15).
    assert "NCCL_MIN_NCHANNELS" not in env and env["NCCL_IB_GID_INDEX"]["value"] == "3"
    assert env["NCCL_SOCKET_IFNAME"]["value"] == "eth0"  # user-set network settings pass
    assert env["ROCMFT_ROOT"]["value"] == "/workspace"
    # the submitting shell's compiled-code cache is never a job's (issue 32): not passed at all
    assert "TORCH_EXTENSIONS_DIR" not in env
    assert env["HF_HOME"]["value"] == "/workspace/.cache/huggingface"  # the host's own cache is not in the pod
    assert dropped == ["HF_HOME"]
    assert all(isinstance(e.get("value", ""), str) for e in env.values())


@pytest.mark.parametrize("replica", ["Master", "Worker"])
def test_pod_templates_pass_the_core_pod_schema_offline(replica):
    job, _, _ = job_for(prepared(), env=SUBMIT_ENV)
    pod = k8s.pod_from_template(job, replica)
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_the_schema_check_is_real():
    job, _, _ = job_for(prepared())
    pod = k8s.pod_from_template(job)
    pod["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_structure_check_catches_what_the_operator_needs():
    job, _, _ = job_for(prepared())
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = []
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"][6] = "0"
    job["spec"]["runPolicy"].pop("activeDeadlineSeconds")
    job["metadata"]["name"] = "Bad_Name"
    messages = " | ".join(p.message for p in k8s.structure_problems(job, nodes=2, nproc=8))
    for part in ("exactly one Master", "3 replicas for 2 nodes", "port `pytorchjob-port` missing",
                 "does not take $(RANK)", "activeDeadlineSeconds", "DNS-1035"):
        assert part in messages, part


def test_one_node_is_a_master_only_and_cpu_asks_cpus():
    job, _, _ = job_for(prepared("tiny-cpu", nodes=1), image="rocmft:0.1.0-cpu")
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "1"}}
    assert k8s.structure_problems(job, nodes=1, nproc=1) == []
    kubernetes_validate.validate(k8s.pod_from_template(job), K8S_VERSION, strict=True)


@pytest.mark.parametrize("run, name", [("llama3-8b-z3-20261202-101500", "rocmft-llama3-8b-z3-20261202-101500"),
                                       ("qwen2.5-7b_lora.x", "rocmft-qwen2-5-7b-lora-x"),
                                       ("a" * 80, "rocmft-" + "a" * 45)])
def test_job_names_are_dns_labels(run, name):
    assert k8s.job_name(run) == name


@pytest.mark.parametrize("limit, s", [("90", 5400), ("10:30", 630), ("04:00:00", 14400), ("1-00", 86400),
                                      ("1-02:03:04", 93784)])
def test_time_limit_to_deadline_seconds(limit, s):
    assert k8s.seconds(limit) == s


def test_launch_renders_the_manifest_and_prints_kubectl_apply(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = prepared()
    a = argparse.Namespace(submit=False, container_image=None, time_limit="02:00:00", k8s_namespace="ml",
                           k8s_pvc="team-rwx", k8s_secret=None, gpus=None, set_string="", overrides=[])
    assert k8s.launch(prep, a) == 0
    manifest = prep.run_dir / "pytorchjob.yaml"
    text = manifest.read_text()
    [job] = k8s.manifest_documents(text)
    assert k8s.structure_problems(job, nodes=2, nproc=8) == []
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "team-rwx"}
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] == f"rocmft:{__version__}-gfx942"
    assert text.startswith("# Kubeflow Training Operator PyTorchJob rendered by rocmft")
    out = capsys.readouterr().out
    assert f"kubectl apply -f {prep.run_dir}/pytorchjob.yaml -n ml" in out
    assert "local tag" in out  # an unqualified image cannot be pulled by a cluster
    assert json.loads((prep.run_dir / "status.json").read_text())["state"] == "rendered"
    assert yaml.safe_load((prep.run_dir / "train.yaml").read_text())["data_shared_file_system"] is True
    assert json.loads((prep.run_dir / "plan.json").read_text())["argv"][6] == "$(RANK)"
