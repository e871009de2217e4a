"""RUNTIME=slurm as data: the sbatch script for 2 x 8 gfx942 pinned line by line, the container wrappers
(Apptainer cannot be installed on CI machines, so its exact command is tested as data), quoting through a real
bash, the checks that run before anything is submitted, and submission against a stand-in `sbatch` (plan as
data: the commands rocmft hands sbatch and what it does with the answer; Slurm's own answers, a refusal
included, come from the real cluster in tests/slurm/test_slurm_train.py).

The real 2-node training on a real Slurm cluster is tests/slurm/test_slurm_train.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rocmft import __version__, pipeline
from rocmft.cli import main as cli
from rocmft.io import paths
from rocmft.io.problems import ProblemReport
from rocmft.launch import slurm

ROOT = paths.root()
RUN = "test-slurm-pinned"
needs_plain_root = pytest.mark.skipif(shlex.quote(str(ROOT)) != str(ROOT), reason="the pinned text assumes a root path without shell-special characters")


def args(**kw) -> argparse.Namespace:
    base = dict(container=None, sif=None, partition=None, account=None, time_limit=None, sbatch_args="",
                container_image=None, submit=True, wait=False, gpus=None, set_string="", overrides=[])
    base.update(kw)
    return argparse.Namespace(**base)


def prepared(recipe="llama3-8b-z3", nodes=2, overrides=(), run_name=RUN, resume=None):
    return pipeline.prepare(recipe, list(overrides), nodes=nodes, run_name=run_name, validate=False, env={}, resume=resume)


def render(prep, a, env=None, python="python"):
    opts = slurm.options_from_args(a, prep.arch, ROOT)
    plan = pipeline.build_plan(prep, python=python, env=env or {}, node_rank="$SLURM_NODEID",
                               master_addr="$MASTER_ADDR", master_port="$MASTER_PORT")
    text = slurm.render_script(plan, prep.recipe, prep.arch, opts, root=ROOT, run_dir=Path(prep.run_dir), python=python)
    return text, plan


def line(text: str, start: str) -> str:
    found = [ln for ln in text.splitlines() if ln.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


PINNED_2X8_GFX942_APPTAINER = """\
#!/bin/bash
# Slurm batch script rendered by rocmft {version} from recipe `llama3-8b-z3` for gfx942:
# 2 nodes x 8 processes, container: apptainer.
# Submit from the project root:  sbatch runs/test-slurm-pinned/sbatch.sh
# Follow it:                     tail -f runs/test-slurm-pinned/train.log    squeue -j <job id>    scancel <job id>
#SBATCH --job-name=rocmft-llama3-8b-z3
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@300
#SBATCH --partition=mi300x
#SBATCH --account=proj123
#SBATCH --chdir={root}
#SBATCH --output={root}/runs/test-slurm-pinned/train.log
#SBATCH --open-mode=append
#SBATCH --export=ALL
set -uo pipefail  # no -e: srun's exit code is the job's, reported below

cd {root}
RUN_DIR={root}/runs/test-slurm-pinned

# The job's environment, from the launch plan (plan.json). Secrets are never written here:
# HF_TOKEN: passed from the submitting shell (sbatch --export=ALL).
export HIP_FORCE_DEV_KERNARG=1
export HSA_NO_SCRATCH_RECLAIM=1
export NCCL_IB_GID_INDEX=3
export NCCL_SOCKET_IFNAME=ens50f0
export OPTIM_TORCH=0
export PYTHONUNBUFFERED=1
export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True
export ROCMFT_RUN_DIR=runs/test-slurm-pinned
export TORCH_BLAS_PREFER_HIPBLASLT=1
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=300
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
unset HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES

# Static rendezvous: node rank = $SLURM_NODEID, master = the first node of the allocation, so global rank 0
# is always on the first node (a c10d rendezvous may put it on either). The address is the node's NodeAddr
# as Slurm knows it; ROCMFT_MASTER_ADDR overrides it (e.g. the address on the fast network).
first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
MASTER_ADDR=${ROCMFT_MASTER_ADDR:-$(scontrol show node "$first_node" -o | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')}
export MASTER_ADDR=${MASTER_ADDR:-$first_node}
# One port per job: two jobs sharing a first node never collide.
export MASTER_PORT=${ROCMFT_MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
echo "[rocmft] slurm job $SLURM_JOB_ID: $SLURM_JOB_NUM_NODES node(s) $SLURM_JOB_NODELIST, rendezvous $MASTER_ADDR:$MASTER_PORT"

# Attempt 1, and one more for each time the job was requeued (Slurm counts them in SLURM_RESTART_COUNT).
export ROCMFT_ATTEMPT=$(( ${SLURM_RESTART_COUNT:-0} + 1 ))
# Records the attempt in status.json; refuses one past resilience.max_requeues (3).
apptainer exec --contain --no-home --no-mount cwd --bind {root}:{root}:ro --bind {root}/runs:{root}/runs --pwd {root} /shared/sif/rocmft-gfx942.sif python -m rocmft.launch.slurm started "$RUN_DIR" || exit $?

# Stops (docs/multinode.md, "Preemption, requeue and restarts"). Slurm sends this script USR1 300 s before
# the time limit (--signal=B:USR1@300; at preemption too where PreemptParameters=send_user_signal). It goes
# to srun, which passes it to torchrun and the ranks on every node: they finish their optimizer step, save a
# checkpoint in the run dir and exit. The bookkeeping after srun then requeues the job (`scontrol requeue
# $SLURM_JOB_ID`, at most 3 times); the next attempt resumes from the newest complete checkpoint
# in this same run dir. SIGTERM (preemption without that notice, scancel, the time limit itself) is only
# recorded: it reaches the ranks too, but srun turns it into a kill of its tasks, so they seldom get to save;
# Slurm requeues the job itself if it preempted it, and the next attempt resumes from the newest complete
# checkpoint (a periodic one, save_steps).
stop_signal= srun_pid=
on_stop() {
  [[ -n $stop_signal ]] && return
  stop_signal=$1
  if [[ $1 == USR1 ]]; then
    echo "[rocmft] slurm sent SIGUSR1: the ranks finish their optimizer step and save a checkpoint"
    [[ -n $srun_pid ]] && kill -s USR1 "$srun_pid" 2>/dev/null
  else
    echo "[rocmft] slurm sent SIGTERM: preempted, cancelled or out of time"
  fi
}
trap 'on_stop USR1' USR1
trap 'on_stop TERM' TERM

# What each node runs: one task per node; torchrun on it starts that node's 8 ranks.
NODE_CMD='echo "[rocmft] node ${SLURM_NODEID} (${SLURMD_NODENAME}): 8 processes"; if [[ -n "${ROCR_VISIBLE_DEVICES:-}" ]]; then unset HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL; fi; exec apptainer exec --contain --no-home --no-mount cwd --rocm --bind {root}:{root}:ro --bind {root}/runs/test-slurm-pinned/output:{root}/runs/test-slurm-pinned/output --pwd {root} /shared/sif/rocmft-gfx942.sif python -m torch.distributed.run --nnodes 2 --node_rank "${SLURM_NODEID}" --nproc_per_node 8 --master_addr "${MASTER_ADDR}" --master_port "${MASTER_PORT}" --max_restarts 2 --signals_to_handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 -m rocmft.worker --run-dir runs/test-slurm-pinned'
code=75
if [[ -z $stop_signal ]]; then  # (a stop that came before the training did leaves nothing to save)
  # --kill-on-bad-exit: one failed rank ends the whole job instead of leaving the other nodes waiting.
  # In the background, so that a signal to this script is handled while srun runs (`wait` returns for it).
  srun --kill-on-bad-exit=1 --nodes="${SLURM_JOB_NUM_NODES}" --ntasks="${SLURM_JOB_NUM_NODES}" --ntasks-per-node=1 --cpus-per-task="${SLURM_CPUS_ON_NODE}" bash -c "$NODE_CMD" &
  srun_pid=$!
  wait "$srun_pid"
  while kill -0 "$srun_pid" 2>/dev/null; do wait "$srun_pid"; done
  wait "$srun_pid"; code=$?  # bash keeps a reaped child's status for `wait`
fi

# Records how the attempt ended (status.json, the summary), requeues after a USR1 stop; its exit code is
# the run's: the failing node's code, 75 for a stop that is not requeued.
apptainer exec --contain --no-home --no-mount cwd --bind {root}:{root}:ro --bind {root}/runs:{root}/runs --pwd {root} /shared/sif/rocmft-gfx942.sif python -m rocmft.launch.slurm ended "$RUN_DIR" "$code" "$stop_signal"
exit $?
"""

PINNED_ARGS = dict(container="apptainer", sif="/shared/sif/rocmft-gfx942.sif", partition="mi300x", account="proj123",
                   time_limit="04:00:00")
SUBMIT_ENV = {"HF_TOKEN": "hf_TOPSECRET_value", "NCCL_SOCKET_IFNAME": "ens50f0", "PATH": "/usr/bin"}


# ---------------------------------------------------------------- the rendered script

@needs_plain_root
def test_2x8_gfx942_apptainer_script_pinned_apptainer_not_installable_on_ci_so_tested_as_data():
    text, plan = render(prepared(), args(**PINNED_ARGS), env=SUBMIT_ENV)
    assert text == PINNED_2X8_GFX942_APPTAINER.replace("{root}", str(ROOT)).replace("{version}", __version__)
    assert plan.world_size == 16 and plan.nnodes == 2 and plan.nproc_per_node == 8


def test_script_never_holds_a_secret_value_only_its_name():
    for container in ("none", "apptainer", "docker"):
        text, plan = render(prepared(), args(**{**PINNED_ARGS, "container": container}), env=SUBMIT_ENV)
        assert "hf_TOPSECRET_value" not in text
        assert plan.secret_env == ("HF_TOKEN",)
        assert "HF_TOKEN: passed from the submitting shell (sbatch --export=ALL)" in text
        assert "#SBATCH --export=ALL" in text


def test_the_plan_argv_is_the_only_argv_and_only_the_rendezvous_is_left_to_the_node():
    text, plan = render(prepared(), args(container="none"), python="/venv/bin/python")
    node_cmd = shlex.split(line(text, "NODE_CMD=").partition("=")[2])[0]
    exec_part = node_cmd.split("; exec ", 1)[1]
    words = shlex.split(exec_part.replace('"${SLURM_NODEID}"', "$SLURM_NODEID").replace('"${MASTER_ADDR}"', "$MASTER_ADDR")
                        .replace('"${MASTER_PORT}"', "$MASTER_PORT"))
    assert tuple(words) == plan.argv
    assert plan.argv[:3] == ("/venv/bin/python", "-m", "torch.distributed.run")
    assert "--rdzv_backend" not in plan.argv  # static rendezvous: rank 0 is always the first node


def test_node_command_expands_per_node_through_a_real_bash(tmp_path):
    """CONTAINER=none with a stand-in python that prints its argv: what one node would execute, exactly."""
    fake = tmp_path / "py thon"  # a space in the path: quoting must hold
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$0" "$@"\n')
    fake.chmod(0o755)
    text, plan = render(prepared("tiny-cpu"), args(container="none"), python=str(fake))
    script = tmp_path / "sbatch.sh"
    script.write_text(text)
    env = {"PATH": os.environ["PATH"], "SLURM_NODEID": "1", "SLURMD_NODENAME": "n2", "MASTER_ADDR": "10.1.2.3",
           "MASTER_PORT": "21234"}
    out = subprocess.run(["bash", "-c", f'eval "$(grep ^NODE_CMD= {shlex.quote(str(script))})"; bash -c "$NODE_CMD"'],
                         env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[rocmft] node 1 (n2): 1 process"
    expected = [a.replace("$SLURM_NODEID", "1").replace("$MASTER_ADDR", "10.1.2.3").replace("$MASTER_PORT", "21234")
                for a in plan.argv]
    assert out[1:] == expected
    assert expected[expected.index("--node_rank") + 1] == "1"


def test_shell_argv_round_trips_awkward_words():
    argv = ("python", "a b", "it's", '"q"', "$HOME", "x;y", "$SLURM_NODEID")
    line_ = "printf '%s\\n' " + slurm.shell_argv(argv)
    out = subprocess.run(["bash", "-c", line_], env={"SLURM_NODEID": "0", "HOME": "/h"}, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["python", "a b", "it's", '"q"', "$HOME", "x;y", "0"]


@pytest.mark.parametrize("container", ["none", "apptainer", "docker"])
@pytest.mark.parametrize("recipe", ["llama3-8b-z3", "tiny-cpu"])
def test_every_rendered_script_is_valid_bash(container, recipe):
    text, _ = render(prepared(recipe), args(container=container, sif="/s/x.sif", container_image="img:1"))
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@needs_plain_root
def test_apptainer_exec_line_is_data_apptainer_cannot_be_installed_on_ci():
    """Issue 32 item 7: contained as RUNTIME=docker is. No $HOME, /tmp or cwd from the host (--contain
    --no-home --no-mount cwd), the project read-only, the job writes only its run dir's output/ (and the
    caches); the bookkeeping (rocmft's code) writes the runs dir."""
    text, _ = render(prepared(), args(container="apptainer", sif="/shared/rocmft-gfx942.sif"))
    node = shlex.split(line(text, "NODE_CMD=").partition("=")[2])[0]
    job = node.split("exec apptainer exec ", 1)[1].split(" python -m ")[0].split()
    assert job[:5] == ["--contain", "--no-home", "--no-mount", "cwd", "--rocm"]
    binds = [job[i + 1] for i, w in enumerate(job) if w == "--bind"]
    assert binds[0] == f"{ROOT}:{ROOT}:ro"
    writable = [b for b in binds if not b.endswith(":ro")]
    assert writable and all(b.split(":")[0].endswith("/output") or "/.cache/" in b for b in writable), binds
    assert f"{ROOT}/runs:{ROOT}/runs" not in binds and "--containall" not in job  # env (secrets) must pass
    assert not any(b.split(":")[0] in (os.path.expanduser("~"), "/tmp", "/home") for b in binds)
    book = [ln for ln in text.splitlines() if ln.startswith("apptainer exec --contain --no-home --no-mount cwd --bind")]
    assert [b.split(" python -m rocmft.launch.slurm ")[1].split()[0] for b in book] == ["started", "ended"]
    assert all("--rocm" not in b for b in book)  # bookkeeping needs no GPU
    # the CPU arch has no ROCm to bind
    cpu, _ = render(prepared("tiny-cpu"), args(container="apptainer", sif="/s/cpu.sif"))
    assert "--rocm" not in cpu


@needs_plain_root
def test_docker_run_line_is_data():
    text, _ = render(prepared(), args(container="docker", container_image="reg.example/rocmft:0.1.0-gfx942"),
                     env=SUBMIT_ENV)
    node = shlex.split(line(text, "NODE_CMD=").partition("=")[2])[0]
    assert ('exec docker run --rm --init --name "rocmft-${SLURM_JOB_ID}-${SLURM_NODEID}" --user "$(id -u):$(id -g)" '
            "--network=host --ipc=host --device=/dev/kfd --device=/dev/dri --group-add video "
            "--cap-add=SYS_NICE -e HF_TOKEN -e HIP_FORCE_DEV_KERNARG") in node
    # the checkout read-only, the run dirs writable (a model's remote code cannot rewrite .git or the Makefile)
    assert (f'-v {ROOT}:{ROOT}:ro -v {ROOT}/runs/test-slurm-pinned/output:{ROOT}/runs/test-slurm-pinned/output "${{ib[@]}}" '
            f"-w {ROOT} reg.example/rocmft:0.1.0-gfx942 python -m torch.distributed.run") in node
    assert "[[ -e /dev/infiniband ]] && ib=(--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1)" in node
    book = [ln for ln in text.splitlines() if ln.startswith("docker run")]
    assert len(book) == 2 and all("-e ROCMFT_SKIP_GPU_CHECK=1 -e SLURM_JOB_ID -e SLURM_JOB_NODELIST" in b
                                  and "--device" not in b for b in book)


def test_docker_binds_the_project_read_only_and_what_the_job_writes_read_write(tmp_path):
    """Slurm's CONTAINER=docker mounts as RUNTIME=docker does: caches inside the project (the tests' HF_HOME)
    and a runs dir outside it writable, each once; Apptainer's binds unchanged (it binds the cwd itself)."""
    from rocmft.launch.slurm import bind_paths

    env = {"HF_HOME": f"{ROOT}/.cache/hf", "MPLCONFIGDIR": f"{ROOT}/.cache/hf/mpl", "TRITON_CACHE_DIR": "rel/x"}
    assert bind_paths(ROOT, tmp_path / "runs" / "r", env) == [
        (str(ROOT), False), (str(tmp_path / "runs"), True), (f"{ROOT}/.cache/hf", True)]
    assert bind_paths(ROOT, ROOT / "runs" / "r", {}) == [(str(ROOT), False), (f"{ROOT}/runs", True)]


def test_cpu_arch_asks_cpus_not_gpus():
    text, _ = render(prepared("tiny-cpu"), args(container="none"))
    assert "#SBATCH --cpus-per-task=1" in text
    assert "--gres" not in text and "--exclusive" not in text
    assert "export PATH=" in text  # the venv's bin first on bare metal


def test_extra_sbatch_args_and_defaults():
    text, _ = render(prepared(), args(container="none", sbatch_args="--qos=high --constraint=mi300x"))
    assert "#SBATCH --qos=high\n#SBATCH --constraint=mi300x\n" in text
    assert f"#SBATCH --time={slurm.DEFAULT_TIME}" in text  # every job has a time limit
    assert "--partition" not in text and "--account" not in text


def test_default_container_is_apptainer_on_gpus_and_none_on_cpu():
    gpu = prepared()
    assert slurm.options_from_args(args(), gpu.arch, ROOT).container == "apptainer"
    assert slurm.options_from_args(args(), gpu.arch, ROOT).sif == str(ROOT / "rocmft-gfx942.sif")
    assert slurm.options_from_args(args(), prepared("tiny-cpu").arch, ROOT).container == "none"


# ---------------------------------------------------------------- checks before submission

@pytest.mark.parametrize("bad, message", [
    (dict(container="singularity"), "unknown container mode `singularity`"),
    (dict(time_limit="forever"), "`forever` is not a Slurm time limit"),
    (dict(sbatch_args="qos=high"), "is not an sbatch option"),
])
def test_bad_options(bad, message):
    with pytest.raises(ProblemReport) as err:
        slurm.options_from_args(args(**bad), prepared().arch, ROOT)
    assert message in str(err.value)


@pytest.mark.parametrize("good", ["90", "10:00", "04:00:00", "1-00", "2-12:00:00"])
def test_slurm_time_formats(good):
    assert slurm.options_from_args(args(time_limit=good), prepared().arch, ROOT).time == good


def test_sbatch_missing_says_what_to_install_or_submit_0():
    opts = slurm.SlurmOptions(container="none")
    [problem] = slurm.submit_problems(opts, True, which=lambda _: None)
    assert problem.severity == "error"
    assert "sbatch not found" in problem.line() and "SUBMIT=0" in problem.line() and "slurm-client" in problem.line()
    assert slurm.submit_problems(opts, False, which=lambda _: None) == []


def test_missing_sif_blocks_submission_but_not_rendering(tmp_path):
    opts = slurm.SlurmOptions(container="apptainer", sif=str(tmp_path / "nope.sif"))
    [err] = slurm.submit_problems(opts, True, which=lambda _: "/usr/bin/sbatch")
    assert err.severity == "error" and "make sif ARCH=" in err.line()
    [warn] = slurm.submit_problems(opts, False, which=lambda _: None)
    assert warn.severity == "warning"


@pytest.mark.parametrize("nodes, message", [("0", "NODES: must be a whole number >= 1, got `0`"),
                                            ("two", "NODES: must be a whole number >= 1, got `two`")])
def test_cli_rejects_bad_nodes(nodes, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    code = cli.main(["train", "tiny-cpu", "--runtime", "slurm", "--nodes", nodes, "--no-submit"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_global_batch_that_does_not_divide_is_caught_before_submission(monkeypatch, tmp_path):
    """llama3-8b-full-z3 is written for 1 x 2 x 8 = 16 packed rows; 3 nodes x 8 GPUs = 24 cannot share 16."""
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(slurm.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(slurm.subprocess, "run", lambda *a, **k: pytest.fail("sbatch called"))
    monkeypatch.setattr(slurm.subprocess, "Popen", lambda *a, **k: pytest.fail("sbatch called"))
    with pytest.raises(ProblemReport) as err:  # by pipeline.prepare, for every runtime: no run dir, no sbatch
        prepared("llama3-8b-full-z3", nodes=3)
    text = str(err.value)
    assert "the recipe's global batch 16 (1 per device x 2 accumulation x 8 GPUs) does not divide across 3 nodes x 8 GPUs = 24 processes" in text
    assert "NODES=1 or 2" in text
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_global_batch_that_can_be_kept_is_a_warning_with_the_exact_set():
    prep = prepared("llama3-8b-z3", nodes=2)
    written = slurm.recipes.load(prep.recipe.path)
    [w] = slurm.batch_problems(prep.recipe, written, set())
    assert w.severity == "warning"
    assert "grows from 16 (as the recipe was written) to 32 on 2 nodes x 8 GPUs" in w.message
    assert w.suggestion == 'to keep 16: SET="per_device_train_batch_size=1 gradient_accumulation_steps=1"'
    # a batch stated on the command line is the user's choice
    assert slurm.batch_problems(prep.recipe, written, {"gradient_accumulation_steps"}) == []
    assert slurm.user_batch_overrides(["gradient_accumulation_steps=2", "llamafactory.lr=1"]) == {"gradient_accumulation_steps"}
    # same world size as written: nothing to say
    one = prepared("llama3-8b-z3", nodes=1)
    assert slurm.batch_problems(one.recipe, written, set()) == []


def test_tiny_cpu_on_two_nodes_warns_but_runs():
    prep = prepared("tiny-cpu", nodes=2)
    [w] = slurm.batch_problems(prep.recipe, slurm.recipes.load(prep.recipe.path), set())
    assert w.severity == "warning" and "2 nodes x 1 process" in w.message
    assert "per_device_train_batch_size=2 gradient_accumulation_steps=1" in w.suggestion


def _old_run(tmp_path: Path, world: int, deepspeed: str, shards: int | None, universal: bool = False) -> Path:
    run = tmp_path / "runs" / "old"
    ckpt = run / "output" / "checkpoint-6"
    (run / "train.yaml").parent.mkdir(parents=True, exist_ok=True)
    (run / "train.yaml").write_text("stage: sft\n")
    (run / "plan.json").write_text(json.dumps({"nproc_per_node": world, "nnodes": 1}))
    (run / "recipe.resolved.yaml").write_text(f"deepspeed: {deepspeed}\ngpus_per_node: {world}\nnodes: 1\n")
    ckpt.mkdir(parents=True)
    if shards:
        tag = "global_step6_universal" if universal else "global_step6"
        (ckpt / tag).mkdir()
        (ckpt / "latest").write_text(tag)
        if universal:
            (ckpt / tag / "zero").mkdir()
        for r in range(shards):
            (ckpt / tag / f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"")
    return ckpt


def test_resume_zero_checkpoint_on_another_node_count_is_refused_with_the_route(tmp_path):
    ckpt = _old_run(tmp_path, 8, "zero3", shards=8)
    prep = prepared("llama3-8b-z3", nodes=2)
    [p] = slurm.resume_problems(prep.recipe, str(ckpt), ROOT)
    assert p.severity == "error"
    assert "saved by 8 DeepSpeed ranks and this run has 16 (2 nodes x 8 GPUs)" in p.message
    assert "universal checkpoint" in p.suggestion and "docs/multinode.md" in p.suggestion
    one = prepared("llama3-8b-z3", nodes=1)
    assert slurm.resume_problems(one.recipe, str(ckpt), ROOT) == []


def test_resume_universal_or_plain_ddp_checkpoint_is_allowed(tmp_path):
    uni = _old_run(tmp_path / "u", 8, "zero3", shards=1, universal=True)
    prep = prepared("llama3-8b-z3", nodes=2)
    [note] = slurm.resume_problems(prep.recipe, str(uni), ROOT)
    assert note.severity == "note" and "load_universal" in note.message
    ddp = _old_run(tmp_path / "d", 1, "none", shards=None)
    tiny = prepared("tiny-cpu", nodes=2)
    [note] = slurm.resume_problems(tiny.recipe, str(ddp), ROOT)
    assert note.severity == "note" and "no DeepSpeed shards" in note.message


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
fs1:/export/projects /shared/projects nfs4 rw,vers=4.2 0 0
10.0.0.5@o2ib:/lus /lus lustre rw 0 0
"""


@pytest.mark.parametrize("where, warned", [("/home/u/rocmft/runs/x", True), ("/shared/projects/rocmft/runs/x", False),
                                           ("/lus/me/runs/x", False), ("/dev/shm/runs/x", True)])
def test_shared_filesystem_heuristic(where, warned):
    recipe = prepared(nodes=2).recipe
    found = slurm.shared_fs_problems(recipe, Path(where), MOUNTS)
    assert bool(found) == warned
    if found:
        assert found[0].severity == "warning" and "NFS, Lustre" in found[0].suggestion
    assert slurm.shared_fs_problems(prepared(nodes=1).recipe, Path(where), MOUNTS) == []


def test_root_cause_of_a_killed_job_is_the_first_node_that_exited():
    log = ("...\nsrun: error: n2: task 1: Exited with exit code 1\nsrun: launch/slurm: _step_signal: Terminating StepId=6.0\n"
           "slurmstepd-n1: error: *** STEP 6.0 ON n1 CANCELLED AT 2026-12-02T13:20:32 ***\nsrun: error: n1: task 0: Terminated\n")
    code, lines = slurm.root_cause(log, 143)
    assert code == 1
    assert lines == ["node n2 (task 1) exited with code 1",
                     "srun returned 143: the other node(s) were stopped by --kill-on-bad-exit"]
    assert slurm.root_cause(log, 0) == (0, [])
    assert slurm.root_cause("no srun lines", 137) == (137, [])


# ---------------------------------------------------------------- launch: render only, and a stand-in sbatch (plan as data)

def test_submit_0_renders_into_the_run_dir(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)  # no Slurm here: rendering needs none
    prep = prepared("tiny-cpu", nodes=2)
    assert slurm.launch(prep, args(submit=False)) == 0
    run = prep.run_dir
    script = run / "sbatch.sh"
    assert script.is_file() and os.access(script, os.X_OK)
    assert json.loads((run / "plan.json").read_text())["nnodes"] == 2
    assert json.loads((run / "status.json").read_text())["state"] == "rendered"
    assert (run / "train.yaml").is_file()
    out = capsys.readouterr().out
    assert f"sbatch {run}/sbatch.sh" in out and "not submitted (SUBMIT=0)" in out
    assert "--cpus-per-task=1" in script.read_text() and sys.executable in script.read_text()


FAKE_SBATCH = """#!/bin/bash
echo "$*" >> "$FAKE_SBATCH_LOG"
if [[ " $* " == *" --test-only "* ]]; then
  cat >/dev/null
  if [[ -n ${FAKE_SBATCH_REFUSE:-} ]]; then
    echo "sbatch: error: invalid partition specified: nope" >&2
    echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2
    exit 1
  fi
  echo "sbatch: Job 41 to start at 2026-12-02T13:00:00 using 2 processors on nodes n[1-2] in partition debug" >&2
  exit 0
fi
echo 42
"""


@pytest.fixture
def fake_sbatch(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SBATCH_LOG", str(tmp_path / "sbatch.log"))
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    return tmp_path / "sbatch.log"


def test_stand_in_sbatch_plan_as_data_test_only_comes_first_and_a_refusal_writes_nothing(fake_sbatch, monkeypatch):
    """What rocmft does: `sbatch --test-only` before the run dir exists, and nothing else when it refuses. The
    refusal's text is the stand-in's own; Slurm's is tests/slurm/...::test_a_partition_that_does_not_exist."""
    monkeypatch.setenv("FAKE_SBATCH_REFUSE", "1")
    prep = prepared("tiny-cpu", nodes=2)
    with pytest.raises(ProblemReport) as err:
        slurm.launch(prep, args(container="none", partition="nope"))
    assert "sbatch: error: invalid partition specified: nope" in str(err.value)  # passed on, whatever it says
    assert not prep.run_dir.exists()
    assert fake_sbatch.read_text().splitlines() == ["--test-only"]


def test_stand_in_sbatch_plan_as_data_the_job_id_and_how_to_follow_it(fake_sbatch, capsys):
    prep = prepared("tiny-cpu", nodes=2)
    assert slurm.launch(prep, args(container="none")) == 0
    out = capsys.readouterr().out
    assert "[rocmft] submitted slurm job 42" in out
    assert f"tail -f {prep.run_dir}/train.log" in out and "squeue -j 42" in out and "scancel 42" in out
    assert fake_sbatch.read_text().splitlines() == ["--test-only", f"--parsable {prep.run_dir}/sbatch.sh"]
