"""report_to's trackers (issue 46; issue 42's refusals): every image carries TensorBoard, W&B and MLflow, each
is pointed at the run's job folder by the launch plan (tested as data: what every runtime hands the job), W&B runs
offline without an exported key, MLflow writes a file store unless the user's MLFLOW_TRACKING_URI says otherwise
(passed by name, never recorded), and a tracker the image lacks, or one transformers does not know, is refused
in one line before anything is written."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from rocmft.hardware import arches
from rocmft.launch import plan as lp
from rocmft.recipe import recipes, tracking
from rocmft.validate import image_packages
from tests.conftest import rocmft

TRACKERS = ["tensorboard", "wandb", "mlflow"]


def test_every_arch_image_carries_the_three_trackers_at_the_locked_versions():
    from rocmft.hardware import versions

    lock = versions.read_pins(versions.lock_file())
    for name, arch in arches.table().items():
        have = {tracking.PACKAGES[t]: arch.image_packages.get(tracking.PACKAGES[t]) for t in TRACKERS}
        assert all(have.values()) and all(lock[p] == v for p, v in have.items()), (name, have)


@pytest.mark.parametrize("value, expected", [
    ("wandb", ["wandb"]), (["tensorboard", "mlflow"], ["tensorboard", "mlflow"]), ("wandb,mlflow", ["wandb", "mlflow"]),
    ("none", []), (None, []), (["none"], []),
])
def test_names(value, expected):
    assert tracking.names(value) == expected


def test_all_means_every_tracker_whose_package_the_image_has():
    assert tracking.names("all", arches.table()["cpu"].image_packages) == TRACKERS


def plan(overrides, host):
    recipe = recipes.load("tiny-cpu", list(overrides))
    return lp.build(recipe, arches.table()[recipe.arch], "runs/x", host, python="python")


def test_each_tracker_writes_into_the_job_folder_and_wandb_is_offline_without_a_key():
    p = plan(["report_to=[tensorboard,wandb,mlflow]"], {"PATH": "/usr/bin"})
    assert {k: v for k, v in p.env.items() if k.startswith(("WANDB", "MLFLOW", "TENSORBOARD"))} == {
        "TENSORBOARD_LOGGING_DIR": "runs/x/output/tensorboard",
        "WANDB_DIR": "runs/x/output", "WANDB_MODE": "offline",
        "MLFLOW_TRACKING_URI": "runs/x/output/mlruns", "MLFLOW_ALLOW_FILE_STORE": "true",
    }


def test_no_tracker_no_tracking_environment():
    p = plan([], {"PATH": "/usr/bin"})  # the bases say report_to: none
    assert not [k for k in p.env if k.startswith(("WANDB", "MLFLOW", "TENSORBOARD"))]


def test_an_exported_key_or_mode_is_the_users_choice_and_an_exported_mlflow_server_passes_by_name():
    host = {"WANDB_API_KEY": "wandb_secret", "MLFLOW_TRACKING_URI": "https://user:pw@mlflow.example", "PATH": "/x"}
    p = plan(["report_to=[wandb,mlflow]"], host)
    assert "WANDB_MODE" not in p.env and "WANDB_API_KEY" in p.secret_env
    assert "MLFLOW_TRACKING_URI" not in p.env and "MLFLOW_TRACKING_URI" in p.secret_env
    assert "pw@" not in p.to_json() and "wandb_secret" not in p.to_json()  # plan.json never holds either
    chosen = plan(["report_to=wandb"], {"WANDB_MODE": "disabled", "WANDB_PROJECT": "mine", "PATH": "/x"})
    assert chosen.env["WANDB_MODE"] == "disabled" and chosen.env["WANDB_PROJECT"] == "mine"


def test_a_recipe_env_still_decides():
    p = plan(["report_to=mlflow", "env.MLFLOW_TRACKING_URI=runs/elsewhere"], {"PATH": "/x"})
    assert p.env["MLFLOW_TRACKING_URI"] == "runs/elsewhere"


def test_a_missing_key_is_one_warning_saying_where_the_offline_run_goes():
    [warning] = tracking.key_warnings("r.yaml", ["wandb", "tensorboard", "mlflow"], {}, "runs/x/output")
    assert warning.severity == "warning" and "W&B runs offline (WANDB_MODE=offline) into runs/x/output/wandb" in warning.message
    assert "wandb sync runs/x/output/wandb/offline-run-*" in warning.suggestion
    assert tracking.key_warnings("r.yaml", ["wandb"], {"WANDB_API_KEY": "k"}, "o") == []


def without(arch_name: str, package: str) -> arches.Arch:
    arch = arches.table()[arch_name]
    return replace(arch, image_packages=MappingProxyType({k: v for k, v in arch.image_packages.items() if k != package}))


@pytest.mark.parametrize("tracker", TRACKERS)
def test_a_tracker_the_image_lacks_is_one_error(tracker):
    package = tracking.PACKAGES[tracker]
    errors, _, _ = image_packages.judge({"report_to": [tracker]}, without("gfx942", package), "t.yaml")
    assert [(p.key, p.severity) for p in errors] == [("report_to", "error")]
    assert f"needs `{package}`, which the gfx942 image does not have" in errors[0].message
    assert image_packages.judge({"report_to": [tracker]}, arches.table()["gfx942"], "t.yaml")[0] == []


def test_an_unknown_tracker_is_refused_with_the_closest_name():
    errors, _, _ = image_packages.judge({"report_to": "wandbb"}, arches.table()["cpu"], "t.yaml")
    assert [p.message for p in errors] == ["transformers has no tracker `wandbb`"] and "`wandb`" in errors[0].suggestion


def test_make_train_refuses_a_tracker_the_image_lacks_before_anything_is_written(job_env, tmp_path, tiny_model):
    job_env.pop("COMET_API_KEY", None)
    proc = rocmft("train", "tiny-cpu", "--runtime", "local", "--set", "report_to=comet_ml", env=job_env)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "report_to: needs `comet-ml`, which the cpu image does not have" in errors[0], proc.stderr
    assert not any(line.startswith("warning:") and "COMET" in line for line in proc.stderr.splitlines())
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
