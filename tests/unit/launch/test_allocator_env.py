"""The allocator setting LLaMA-Factory's launcher gives its torchrun jobs, given to ours (launch/plan.py
`allocator_env`), as data: which jobs get it, and that a setting of the user's or the recipe's wins. No ROCm
GPU here: what the job's torch does with it is read from the installed sources, not run."""

import re
from importlib.util import find_spec
from pathlib import Path

from rocmft.hardware import arches
from rocmft.launch import plan as lp
from rocmft.recipe import recipes

A = arches.table()
SETTING = ("PYTORCH_HIP_ALLOC_CONF", "expandable_segments:True")


def env_of(name, overrides=(), host=None):
    r = recipes.load(name, list(overrides))
    return lp.build(r, A[r.arch], "runs/x", host or {"PATH": "/usr/bin"}, python="python").env


def test_plan_data_every_gpu_job_gets_expandable_segments_a_cpu_job_none():
    for name in ("llama3-8b-z3", "llama3-8b-lora", "qwen2.5-7b-lora-7900xtx"):
        assert env_of(name)[SETTING[0]] == SETTING[1], name
    assert not set(lp.ALLOC_CONF_VARS) & set(env_of("tiny-cpu"))
    # the debugging shell is the job's environment on that arch
    assert lp.shell(A["gfx942"], {}, None).env[SETTING[0]] == SETTING[1]


def test_plan_data_a_setting_of_the_recipe_or_the_shell_wins():
    mine = env_of("llama3-8b-z3", ["env.PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512"])
    assert mine["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512" and SETTING[0] not in mine
    off = env_of("llama3-8b-z3", ["env.PYTORCH_HIP_ALLOC_CONF=expandable_segments:False"])
    assert off[SETTING[0]] == "expandable_segments:False"
    # from the shell: passed on (a container gets it too, not only a local job) and ours stands aside
    shell = env_of("llama3-8b-z3", host={"PYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.8"})
    assert shell["PYTORCH_ALLOC_CONF"] == "garbage_collection_threshold:0.8" and SETTING[0] not in shell


def _site_file(package: str, rel: str) -> Path:
    spec = find_spec(package)
    assert spec is not None and spec.origin, f"{package} is part of the training venv"
    return Path(spec.origin).parent / rel


def test_the_value_is_what_llamafactorys_launcher_sets_for_its_torchrun_jobs():
    text = _site_file("llamafactory", "launcher.py").read_text()
    block = text[text.index('if is_env_enabled("OPTIM_TORCH", "1")'):]
    assert re.search(r'env\["PYTORCH_CUDA_ALLOC_CONF"\] = "expandable_segments:True"', block[:400])


def test_rocm_torch_reads_the_hip_name_after_the_cuda_one():
    # The installed torch's header (the CPU wheel ships the CUDA headers with their ROCm branches).
    text = _site_file("torch", "include/c10/cuda/CUDAAllocatorConfig.h").read_text()
    cuda = text.index('get_env("PYTORCH_CUDA_ALLOC_CONF")')
    hip = text.index('get_env("PYTORCH_HIP_ALLOC_CONF")')
    assert cuda < hip and "#ifdef USE_ROCM" in text[cuda:hip]
