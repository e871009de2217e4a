"""The launch plan is data: exact argv and env for 1 GPU, 8 GPUs, a subset, CPU, multi-node."""

import json

import pytest

from rocmft.hardware import arches
from rocmft.io.problems import ProblemReport
from rocmft.launch import plan as lp
from rocmft.recipe import recipes

A = arches.table()
HOST = {"HF_HOME": "/data/hf", "HF_TOKEN": "hf_secret", "PATH": "/usr/bin", "HIP_VISIBLE_DEVICES": "",
        "NCCL_SOCKET_IFNAME": "eth0"}


def build(name, overrides=(), gpus=None, env=HOST, **kw):
    r = recipes.load(name, list(overrides))
    return lp.build(r, A[r.arch], "runs/x", env, python="python", gpus=gpus, **kw)


def test_one_gpu_runs_the_worker_directly():
    p = build("llama3-8b-lora")
    assert p.argv == ("python", "-u", "-m", "rocmft.worker", "--run-dir", "runs/x")
    assert not p.distributed and p.world_size == 1
    assert p.env["HIP_FORCE_DEV_KERNARG"] == "1" and p.env["OPTIM_TORCH"] == "0"
    assert p.env["ROCMFT_RUN_DIR"] == "runs/x" and p.env["HF_HOME"] == "/data/hf"
    assert set(p.unset_env) == {"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}


def test_eight_gpus_torchrun_standalone():
    p = build("llama3-8b-z3")
    assert p.argv == ("python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                      "--nproc_per_node", "8", "--max_restarts", "2",
                      "--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", "-m", "rocmft.worker", "--run-dir", "runs/x")
    assert p.distributed and p.world_size == 8
    assert p.env["NCCL_MIN_NCHANNELS"] == "112"
    assert "NCCL_IB_GID_INDEX" not in p.env  # multi-node network settings only for nodes > 1


def test_a_restarting_group_gets_a_fresh_rendezvous_store_per_round():
    # pytorch/pytorch#135712: with the shared store a restarted group can read the dead group's addresses
    assert build("llama3-8b-z3").env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"  # max_restarts 2
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in build("llama3-8b-z3", ["resilience.max_restarts=0"]).env


def test_gpu_subset_selects_with_rocr_only():
    p = build("llama3-8b-z3", ["gpus_per_node=2"], gpus=("2", "3"))
    assert p.env["ROCR_VISIBLE_DEVICES"] == "2,3"
    assert "HIP_VISIBLE_DEVICES" in p.unset_env and "CUDA_VISIBLE_DEVICES" in p.unset_env
    assert "ROCR_VISIBLE_DEVICES" not in p.unset_env
    assert p.argv[p.argv.index("--nproc_per_node") + 1] == "2"


def test_gpu_count_must_match_processes():
    with pytest.raises(ProblemReport) as exc:
        build("llama3-8b-z3", gpus=("0", "1"))
    assert "gpus_per_node=2" in str(exc.value)


def test_cpu_plan():
    p = build("tiny-cpu")
    assert p.argv[:4] == ("python", "-u", "-m", "rocmft.worker")
    assert p.env["DS_ACCELERATOR"] == "cpu" and p.env["OMP_NUM_THREADS"] == "1"
    assert "ROCR_VISIBLE_DEVICES" not in p.env
    p2 = build("tiny-cpu", ["gpus_per_node=2", "deepspeed=zero3"])
    assert p2.argv[2] == "torch.distributed.run" and p2.nproc_per_node == 2


def test_deepspeed_on_one_gpu_still_goes_through_torchrun():
    assert build("llama3-8b-lora", ["deepspeed=zero2"]).distributed


def test_multinode_static_rendezvous_with_placeholders():
    p = build("llama3-8b-z3", ["nodes=2"], node_rank="$SLURM_NODEID", master_addr="$MASTER_ADDR", master_port="$MASTER_PORT")
    assert p.argv == ("python", "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "$SLURM_NODEID",
                      "--nproc_per_node", "8", "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT",
                      "--max_restarts", "2", "--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
                      "-m", "rocmft.worker", "--run-dir", "runs/x")
    assert p.env["NCCL_IB_GID_INDEX"] == "3" and p.env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_secrets_are_names_only():
    p = build("llama3-8b-z3")
    assert p.secret_env == ("HF_TOKEN",)
    assert "hf_secret" not in p.to_json() and "hf_secret" not in json.dumps(dict(p.env))


def test_device_selection_from_the_shell_and_mixed_refused():
    assert lp.devices_from_env({"HIP_VISIBLE_DEVICES": "0,1"}) == ("0", "1")
    with pytest.raises(ProblemReport) as exc:
        lp.devices_from_env({"HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "1"})
    assert "set twice" in str(exc.value)
    with pytest.raises(ProblemReport):
        lp.parse_gpus("0,a")


def test_job_env_applies_unset_and_plan():
    p = build("llama3-8b-z3", ["gpus_per_node=2"], gpus=("0", "1"))
    env = lp.job_env(p, {"HIP_VISIBLE_DEVICES": "5", "PATH": "/bin"})
    assert "HIP_VISIBLE_DEVICES" not in env and env["ROCR_VISIBLE_DEVICES"] == "0,1" and env["PATH"] == "/bin"


def test_a_gpu_subset_says_how_to_keep_the_recipes_global_batch(tmp_path, monkeypatch):
    from rocmft import pipeline
    from rocmft.recipe import recipes

    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    lf = recipes.load("llama3-8b-z3").llamafactory  # the recipe's own batch, whatever it ships with
    micro, accum = lf["per_device_train_batch_size"], lf["gradient_accumulation_steps"]
    written, on_two = micro * accum * 8, micro * accum * 2
    prep = pipeline.prepare("llama3-8b-z3", gpus="2,3", validate=False, env={})
    [warning] = [m for m in prep.messages if m.key == "global batch"]
    assert warning.severity == "warning" and f"shrinks from {written}" in warning.message
    assert f"to {on_two}" in warning.message
    keep = f"gradient_accumulation_steps={accum * 4}"  # 8 GPUs -> 2: four times the accumulation
    assert f"per_device_train_batch_size={micro} {keep}" in warning.suggestion
    kept = pipeline.prepare("llama3-8b-z3", [keep], gpus="2,3", validate=False, env={})
    assert not [m for m in kept.messages if m.key == "global batch"]


def test_the_debugging_shell_gets_a_jobs_environment_and_devices():
    job = build("llama3-8b-z3", ["gpus_per_node=2"], gpus=("2", "3"))
    sh = lp.shell(A["gfx942"], HOST, ("2", "3"))
    assert sh.argv == ("bash",) and sh.unset_env == job.unset_env and sh.secret_env == ("HF_TOKEN",)
    job_only = ("PYTHONUNBUFFERED", "OPTIM_TORCH", "ROCMFT_RUN_DIR", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
                "TORCH_DISABLE_SHARE_RDZV_TCP_STORE")
    assert {k: v for k, v in job.env.items() if k not in job_only} == dict(sh.env)


def test_a_recipes_own_secret_goes_by_name_to_every_runtime(tmp_path, monkeypatch):
    """`secrets: [MY_REGISTRY_TOKEN]`: passed like HF_TOKEN (docker --env NAME, sbatch -e NAME, a k8s Secret
    reference), its value never written."""
    import argparse

    from rocmft import pipeline
    from rocmft.launch import docker as rt
    from rocmft.launch import k8s, slurm
    from tests.unit.launch.test_docker_spec import laptop

    recipe = tmp_path / "own.yaml"
    recipe.write_text("base: tiny-cpu\nsecrets: [MY_REGISTRY_TOKEN]\n")
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    env = {"MY_REGISTRY_TOKEN": "tok_VALUE_123", "HF_TOKEN": "hf_VALUE"}
    prep = pipeline.prepare(str(recipe), [], run_name="own", validate=False, env=env)
    plan = pipeline.build_plan(prep, python="python", env=env)
    assert plan.secret_env == ("HF_TOKEN", "MY_REGISTRY_TOKEN")
    spec = rt.container_spec(plan, prep.arch, laptop(), image="rocmft:cpu")
    assert "--env=MY_REGISTRY_TOKEN" in rt.docker_run_argv(spec)
    a = argparse.Namespace(container="docker", sif=None, partition=None, account=None, time_limit=None,
                           sbatch_args="", container_image="img:1", submit=False, wait=False, gpus=None)
    script = slurm.render_script(plan, prep.recipe, prep.arch, slurm.options_from_args(a, prep.arch, tmp_path),
                                 root=tmp_path, run_dir=tmp_path / "runs" / "own", python="python")
    assert "-e MY_REGISTRY_TOKEN" in script
    job, _ = k8s.build_job(plan, prep.recipe, prep.arch, name="rocmft-own", run_name="own", image="img:1", pvc="p",
                           secret="s", namespace=None, deadline_s=60, root=tmp_path)
    pod_env = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "MY_REGISTRY_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "MY_REGISTRY_TOKEN",
                                                                         "optional": True}}} in pod_env
    for text in (plan.to_json(), spec.to_json(), script, json.dumps(job)):
        assert "tok_VALUE_123" not in text and "hf_VALUE" not in text


def test_cpu_offload_gives_each_rank_its_share_of_the_physical_cores():
    # torchrun sets OMP_NUM_THREADS=1 when it is unset: DeepSpeed's CPU Adam would step on one core per rank.
    p = build("qwen2.5-7b-z3-offload", physical_cores=96)
    assert p.env["OMP_NUM_THREADS"] == str(96 // p.nproc_per_node)
    assert build("qwen2.5-7b-z3-offload", physical_cores=4, overrides=["gpus_per_node=8"]).env["OMP_NUM_THREADS"] == "1"
    # Not offloading, or no core count: torchrun's own default stays.
    assert "OMP_NUM_THREADS" not in build("llama3-8b-z3", physical_cores=96).env
    assert "OMP_NUM_THREADS" not in build("qwen2.5-7b-z3-offload").env
    # The recipe's own env wins.
    assert build("qwen2.5-7b-z3-offload", ["env.OMP_NUM_THREADS=3"], physical_cores=96).env["OMP_NUM_THREADS"] == "3"


def test_hsa_no_scratch_reclaim_on_cdna3_and_cdna4_only():
    assert build("llama3-8b-z3").env["HSA_NO_SCRATCH_RECLAIM"] == "1"
    assert A["gfx950"].env["HSA_NO_SCRATCH_RECLAIM"] == "1"
    assert "HSA_NO_SCRATCH_RECLAIM" not in A["gfx1100"].env and "HSA_NO_SCRATCH_RECLAIM" not in A["gfx90a"].env
