"""Real training on CPU with the tiny model, through the same CLI users run (`pytest -m train`).

The plain one-process run is the session's `trained_run` (tests/conftest.py), shared with the chat/serve and
progress tests; its facts (step count, checkpoints) are read from it, never assumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TrainedRun, offline_env, rocmft, wait_until

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("train"))


def runs_dir(env) -> Path:
    return Path(env["ROCMFT_RUNS"])


def train(env, name, *overrides, expect=0, timeout=900):
    proc = rocmft("train", "tiny-cpu", "--runtime", "local", "--run-name", name, *overrides, env=env, timeout=timeout)
    assert proc.returncode == expect, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, runs_dir(env) / name


def events_end(run):
    from rocmft.launch import events

    return events.read(run)[-1]


def losses(run):
    return [json.loads(line)["loss"] for line in (run / "output" / "trainer_log.jsonl").read_text().splitlines()
            if "loss" in json.loads(line)]


def assert_events_match_the_trainer_log(run):
    """progress.jsonl (what every terminal shows) holds one event per logged step: the same steps, strictly
    increasing, with the same losses as LLaMA-Factory's trainer_log.jsonl."""
    from rocmft.launch import events

    found = events.read(run)
    stepped = events.steps(found)
    logged = [json.loads(line) for line in (run / "output" / "trainer_log.jsonl").read_text().splitlines()]
    logged = [e for e in logged if "loss" in e]
    assert [e["step"] for e in stepped] == [e["current_steps"] for e in logged]
    assert all(b["step"] > a["step"] for a, b in zip(stepped, stepped[1:]))
    assert [round(e["loss"], 5) for e in stepped] == [round(e["loss"], 5) for e in logged]
    assert found[0]["event"] == "begin" and found[-1]["event"] == "end" and len(found) == len(stepped) + 2
    configured = yaml.safe_load((run / "train.yaml").read_text())["max_steps"]
    assert all(e["tokens_per_s_per_gpu"] > 0 and e["max_steps"] == configured for e in stepped)
    assert found[-1]["peak_memory_gib"] > 0.1 and found[-1]["memory_kind"] == "rss"


def assert_trained(run):
    from safetensors import safe_open

    adapter = run / "output" / "adapter_model.safetensors"
    assert adapter.is_file()
    with safe_open(str(adapter), "pt") as f:
        lora = [k for k in f.keys() if "lora_A" in k or "lora_B" in k]
    assert len(lora) >= 2 * 7 * 2  # A and B for 7 targeted modules in each of 2 layers
    values = losses(run)
    rendered = yaml.safe_load((run / "train.yaml").read_text())
    assert len(values) == rendered["max_steps"] // rendered.get("logging_steps", 1) and values[-1] < values[0], values
    assert json.loads((run / "status.json").read_text())["state"] == "succeeded"


def test_one_process(trained_run: TrainedRun):
    run = trained_run.path  # trained through `make train RECIPE=tiny-cpu RUNTIME=local RUN_NAME=...`
    assert_trained(run)
    for name in ("recipe.resolved.yaml", "train.yaml", "plan.json", "versions.json", "train.log", "output/training_loss.png"):
        assert (run / name).is_file(), name
    versions = json.loads((run / "versions.json").read_text())
    assert versions["git_commit"] != "unknown" and versions["host_stack"]["llamafactory"] == "0.9.5"
    assert "adapter_model.safetensors" in trained_run.output and "training_loss.png" in trained_run.output
    assert_events_match_the_trainer_log(run)
    assert "No metric" not in (run / "train.log").read_text()  # our plot: no eval-metric warnings for a train-only run


def test_two_processes_torchrun_gloo(env):
    _, run = train(env, "ddp", "gpus_per_node=2")
    assert_trained(run)
    assert_events_match_the_trainer_log(run)
    assert json.loads((run / "status.json").read_text())["tokens_per_s_per_gpu"] > 0
    assert "max over 2 ranks" in events_end(run)["memory_scope"]
    assert "world size: 2" in (run / "train.log").read_text()
    assert json.loads((run / "plan.json").read_text())["nproc_per_node"] == 2


# What ds_configs/zero{2,3}.json.j2 held before issue 21 (LLaMA-Factory's example files): the control run.
PREVIOUS = {
    "zero2": {"overlap_comm": False, "allgather_bucket_size": 500000000, "reduce_bucket_size": 500000000},
    "zero3": {"overlap_comm": False, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
              "stage3_param_persistence_threshold": "auto"},
}


def _previous_preset_losses(env, preset: str, steps: int) -> list[float]:
    """The same recipe rendered, its DeepSpeed JSON put back to the previous preset, run by llamafactory-cli."""
    name = f"{preset}-previous"
    proc = rocmft("render", "tiny-cpu", "--run-name", name, "gpus_per_node=2", f"deepspeed={preset}",
                  f"max_steps={steps}", env=env)
    assert proc.returncode == 0, proc.stderr
    run = runs_dir(env) / name
    ds = json.loads((run / "ds_config.json").read_text())
    ds["zero_optimization"].update(PREVIOUS[preset])
    (run / "ds_config.json").write_text(json.dumps(ds))
    cli = Path(sys.executable).with_name("llamafactory-cli")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = {**env, "FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "2", "MASTER_PORT": str(port), "MASTER_ADDR": "127.0.0.1",
           "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1",
           # LLaMA-Factory's launcher calls `torchrun` by name: the venv's bin must be on PATH (pytest may be
           # started as .venv/bin/python -m pytest, without an activated venv).
           "PATH": f"{cli.parent}{os.pathsep}{env.get('PATH', '')}"}
    done = subprocess.run([str(cli), "train", str(run / "train.yaml")], cwd=ROOT, env=job, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return losses(run)


@pytest.mark.parametrize("preset", ["zero2", "zero3"])
def test_two_processes_deepspeed_presets_match_the_previous_ones(env, preset):
    # Same math, different scheduling (overlap_comm, buckets, prefetch, persistence): the same seed gives the
    # same first losses. The tiny model's parameters are all under the new persistence threshold, so the new
    # ZeRO-3 run keeps them resident, while the previous preset (10 x hidden) gathers them: both paths train.
    steps = 4
    _, run = train(env, preset, "gpus_per_node=2", f"deepspeed={preset}", f"max_steps={steps}", timeout=1200)
    ds = json.loads((run / "ds_config.json").read_text())["zero_optimization"]
    assert ds["stage"] == int(preset[-1]) and ds["overlap_comm"] is True
    assert yaml.safe_load((run / "train.yaml").read_text())["deepspeed"].endswith(f"/{preset}/ds_config.json")
    new = losses(run)
    old = _previous_preset_losses(env, preset, steps)
    assert len(new) == len(old) == steps
    assert new == pytest.approx(old, rel=1e-3, abs=1e-3), (new, old)
    assert json.loads((run / "status.json").read_text())["state"] == "succeeded"


def test_watchdog_leaves_a_normal_run_unchanged(env, trained_run: TrainedRun):
    _, run = train(env, "nowatch", "watchdog=false")
    assert losses(run) == trained_run.losses() != []


def test_resume_continues_the_step_count_with_a_lower_learning_rate(env, trained_run: TrainedRun):
    last = trained_run.checkpoints()[-1]
    saved = int(last.name.split("-")[1])
    more = trained_run.max_steps + 4
    proc, run = train(env, "resumed", "--resume", str(trained_run.path), f"max_steps={more}", "learning_rate=1e-3")
    log = [json.loads(line) for line in (run / "output" / "trainer_log.jsonl").read_text().splitlines()]
    assert log[0]["current_steps"] == saved + 1 and log[-1]["current_steps"] == more  # joins up after the checkpoint
    assert all(entry["lr"] <= 1e-3 + 1e-12 for entry in log if "lr" in entry)
    status = json.loads((run / "status.json").read_text())
    assert status["resumed_from"].endswith(f"{trained_run.name}/output/{last.name}")


def test_export_merges_the_adapter(env, trained_run: TrainedRun):
    run = trained_run.copy_to(runs_dir(env), "exported")  # export writes merged/ into the run
    proc = rocmft("export", str(run), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run / "merged" / "model.safetensors").is_file() and (run / "merged" / "config.json").is_file()
    again = rocmft("export", str(run), env=env)
    assert again.returncode == 2 and "not overwritten" in again.stderr


def test_divergence_is_stopped_with_advice(env):
    # A full fine-tune of the tiny model at lr 10: the loss jumps from ~6.7 to thousands at step 2.
    # (A LoRA at absurd rates only saturates this tiny model at ln(vocab), which is no divergence.)
    proc, run = train(env, "diverge", "learning_rate=10", "finetuning_type=full", "save_steps=2", expect=3)
    report = json.loads((run / "output" / "diverged.json").read_text())
    assert report["step"] < int(yaml.safe_load((run / "train.yaml").read_text())["max_steps"])
    assert report["loss_tail"] and report["precision"] == "fp32"
    assert report["learning_rate"] == 10
    assert "DIVERGED" in proc.stdout and "halve the learning rate" in proc.stdout
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "diverged" and status["exit_code"] == 3
    assert not (run / "output" / "model.safetensors").exists()  # diverged weights never saved as final
    assert "last good checkpoint: " in proc.stdout


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    kids = [int(x) for x in out.split()]
    return kids + [g for k in kids for g in _children(k)]


def _start(env, name, *overrides):
    return subprocess.Popen([sys.executable, "-m", "rocmft.cli.main", "train", "tiny-cpu", "--runtime", "local",
                             "--run-name", name, "--quiet", "max_steps=100000", "save_steps=100000", *overrides],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_training(run: Path, launcher: subprocess.Popen, timeout=600):
    def logged() -> bool:
        assert launcher.poll() is None, launcher.stdout.read()[-3000:]
        log = run / "output" / "trainer_log.jsonl"
        return log.is_file() and log.stat().st_size > 0

    wait_until(logged, timeout=timeout, what="the first logged step")


def test_ctrl_c_saves_a_checkpoint_then_stops_every_process_and_marks_interrupted(env, process_mark):
    """Both ranks agree on the step to stop at (one all_reduce per step), save it, and exit; nothing is orphaned."""
    from rocmft import checkpoints
    from rocmft.launch import events

    launcher = _start(process_mark.env(env), "interrupted", "gpus_per_node=2")  # whatever happens, stopped at teardown
    run = runs_dir(env) / "interrupted"
    _wait_for_training(run, launcher)
    tree = _children(launcher.pid)
    assert len(tree) >= 3  # torchrun + 2 ranks
    launcher.send_signal(signal.SIGINT)
    out, _ = launcher.communicate(timeout=300)
    assert launcher.returncode == 130, out[-3000:]
    # every process the launcher started, in its tree or not, ends (an orphan would run on for ever)
    wait_until(lambda: process_mark.alive() == [], timeout=60, what="every process of the run gone")
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "interrupted" and status["signal"] == "SIGINT"
    [stop] = [e for e in events.read(run) if e["event"] == "stop"]
    step = stop["step"]
    assert [e["step"] for e in events.steps(events.read(run))][-1] == step  # nothing trained past the save
    checkpoint = run / "output" / f"checkpoint-{step}"
    assert checkpoints.problem(checkpoint) is None
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == step
    assert status["attempts"][-1]["checkpoint"] == checkpoint.name
    assert f"interrupted by SIGINT at step {step}: {checkpoint} saved" in out


def test_a_killed_rank_fails_the_job_naming_the_rank(env, process_mark):
    launcher = _start(process_mark.env(env), "killed", "gpus_per_node=2")
    run = runs_dir(env) / "killed"
    _wait_for_training(run, launcher)
    rank1 = [p for p in _children(launcher.pid)
             if b"LOCAL_RANK=1\x00" in Path(f"/proc/{p}/environ").read_bytes()]
    assert rank1, "rank 1 not found"
    os.kill(rank1[0], signal.SIGKILL)
    out, _ = launcher.communicate(timeout=120)
    assert launcher.returncode != 0
    assert "rank 1 (local_rank 1)" in out and "SIGKILL" in out, out[-2000:]
    last = out.splitlines()[-4:]  # the cause and where the whole output is, where the eye ends
    assert last[-1] == f"[rocmft] full output: {run}/train.log", last
    assert any("FAILED" in line and "rank 1 (local_rank 1)" in line and "SIGKILL" in line for line in last), last
    assert json.loads((run / "status.json").read_text())["state"] == "failed"


def test_rendered_yaml_runs_with_plain_llamafactory_cli(env):
    # The rendered files are plain LLaMA-Factory inputs: `llamafactory-cli train` runs one as-is.
    proc = rocmft("render", "tiny-cpu", "--run-name", "plain", "max_steps=3", env=env)
    assert proc.returncode == 0, proc.stderr
    run = runs_dir(env) / "plain"
    cli = Path(sys.executable).with_name("llamafactory-cli")
    done = subprocess.run([str(cli), "train", str(run / "train.yaml")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (run / "output" / "adapter_model.safetensors").is_file()
