"""TUNE=1 as a launch plan (no AMD GPU here, so nothing is tuned or measured): the TunableOp environment, the
results' cache path keyed by image and model shape, the reuse rule, how it reaches the job's plan and the
container's mounts, and how a bench row records it."""

from __future__ import annotations

import argparse

from rocmft.cli import train
from rocmft.io import paths
from rocmft.launch import docker as rt
from rocmft.launch import tuning
from rocmft.recipe import recipes
from tests.conftest import ROOT as REAL_ROOT
from tests.unit.launch.test_docker_spec import A, mi300x_node, plan_for


def _shape(name, *overrides):
    r = recipes.load(name, list(overrides))
    return tuning.shape_key(r.llamafactory, "bf16")


def test_shape_key_follows_the_gemm_shapes_only():
    key = _shape("llama3-8b-lora")
    assert key.startswith("Meta-Llama-3-8B-Instruct-bf16-lora-r16-1x8192-neat-")  # model, dtype, rank, batch x cutoff
    assert _shape("llama3-8b-lora", "learning_rate=1e-6") == key  # not a shape
    assert _shape("llama3-8b-lora", "cutoff_len=1024") != key  # tokens per micro-batch
    assert _shape("llama3-8b-lora", "lora_rank=64") != key  # the adapter's GEMMs
    # padded rows: the micro-batch's row count is a GEMM dimension as much as its length
    padded = ("neat_packing=false", "packing=false", "cutoff_len=2048")
    two, four = _shape("llama3-8b-lora", *padded, "per_device_train_batch_size=2"), \
        _shape("llama3-8b-lora", *padded, "per_device_train_batch_size=4")
    assert "-2x2048-" in two and "-4x2048-" in four and two != four


def test_reuse_rule_tunes_once_then_reads(tmp_path):
    first = tuning.plan(tmp_path, "rocmft_0.1.0-gfx942", "shape")
    assert first.tuning and first.state == "tuning"
    assert first.folder == (tmp_path / ".cache/tunableop/rocmft_0.1.0-gfx942/shape").resolve()
    assert first.env() == {"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "1",
                           "PYTORCH_TUNABLEOP_FILENAME": f"{first.folder}/tunableop_results%d.csv"}
    first.folder.mkdir(parents=True)
    (first.folder / "tunableop_results0.csv").write_text("Validator,PT_VERSION,2.10.0\n")  # what rank 0 writes at exit
    again = tuning.plan(tmp_path, "rocmft_0.1.0-gfx942", "shape")
    assert not again.tuning and again.env()["PYTORCH_TUNABLEOP_TUNING"] == "0"
    assert tuning.plan(tmp_path, "rocmft_0.2.0-gfx942", "shape").tuning  # another image tunes for itself
    assert tuning.plan(tmp_path, "rocmft_0.1.0-gfx942", "other-shape").tuning


def test_image_key():
    from rocmft import __version__

    assert tuning.image_key("docker", "gfx942", None) == f"rocmft_{__version__}-gfx942"  # the versioned tag
    assert tuning.image_key("docker", "gfx942", "registry.example.com/rocmft:x") == "registry.example.com_rocmft_x"
    assert tuning.image_key("local", "cpu", None, "2.13.0+cpu") == "venv-cpu-torch2.13.0_cpu"


def test_tune_reaches_the_plan_and_the_container_mounts_the_results_writable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCMFT_ROOT", str(tmp_path))  # the cache folder it makes lands in a tmp project
    for folder in ("recipes", "docker", "ds_configs"):
        (tmp_path / folder).symlink_to(REAL_ROOT / folder)
    args = argparse.Namespace(tune=True, recipe="llama3-8b-lora", arch=None, runtime="docker", docker_image=None)
    extra = train.tune_overrides(args, [])
    assert "no TunableOp results for this image and shape yet" in capsys.readouterr().out
    assert tuning.state_of(extra) == "tuning"
    plan = plan_for("llama3-8b-lora", extra)
    filename = plan.env["PYTORCH_TUNABLEOP_FILENAME"]
    assert filename.startswith(str(tmp_path)) and "/.cache/tunableop/" in filename
    assert "/runs/" not in filename  # never a run dir: a container rewrites it
    assert (plan.env["PYTORCH_TUNABLEOP_ENABLED"], plan.env["PYTORCH_TUNABLEOP_TUNING"]) == ("1", "1")
    spec = rt.container_spec(plan, A["gfx942"], mi300x_node(project_root=str(tmp_path)), image="rocmft:gfx942",
                             launcher_pid=1)
    folder = filename.rsplit("/", 1)[0]
    assert any(m.source == folder and not m.read_only for m in spec.mounts)
    assert tuning.state_of([]) == "untuned"
    assert not train.tune_overrides(argparse.Namespace(tune=False), [])

