"""Experiment trackers (`report_to:`): which package each needs in the image, where its files go, and what the
user is told when a key is missing.

LLaMA-Factory passes `report_to` to transformers, whose callbacks (transformers/integrations/integration_utils.py)
write TensorBoard events under `output_dir`, a W&B run under WANDB_DIR, an MLflow run to MLFLOW_TRACKING_URI.
rocmft points each into the run dir's job folder (`output/`, the one folder a container may write), so a run's
tracking stays with the run:

- W&B runs offline (WANDB_MODE=offline) unless WANDB_API_KEY is exported: without a key `wandb` would stop the
  job asking for a login; the offline run is uploaded later with `wandb sync <run>/output/wandb/offline-run-*`.
- MLflow writes a file store in the run dir unless MLFLOW_TRACKING_URI is exported (then that server; the URI is
  passed by name, never recorded, as it may hold a password). mlflow-skinny 3.18 refuses the file store unless
  MLFLOW_ALLOW_FILE_STORE=true ("maintenance mode": it still works, and `mlflow ui` reads it).
- TensorBoard writes its event files to `output/tensorboard` (TENSORBOARD_LOGGING_DIR).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..io.problems import Problem

# transformers' report_to names (INTEGRATION_TO_CALLBACK) -> the package its callback imports (canonical pip name).
PACKAGES = {
    "tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow-skinny", "comet_ml": "comet-ml",
    "neptune": "neptune", "clearml": "clearml", "dvclive": "dvclive", "swanlab": "swanlab", "trackio": "trackio",
    "codecarbon": "codecarbon", "azure_ml": "azureml-core", "dagshub": "dagshub", "flyte": "flytekit",
}
# The ones rocmft points at the run dir (every image carries their packages: docker/arches.yaml).
KEPT = ("tensorboard", "wandb", "mlflow")
# The tracker's credential, when it has one: without it exported the tracker cannot log to its service.
KEYS = {"wandb": "WANDB_API_KEY", "comet_ml": "COMET_API_KEY", "neptune": "NEPTUNE_API_TOKEN",
        "clearml": "CLEARML_API_SECRET_KEY", "swanlab": "SWANLAB_API_KEY"}
# The user's own tracker settings, passed to the job when exported (a container gets only what it is given).
PASSED = ("WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_RUN_GROUP", "WANDB_TAGS", "WANDB_BASE_URL",
          "MLFLOW_EXPERIMENT_NAME")
TB_DIR, WANDB_DIR, MLFLOW_DIR = "tensorboard", "wandb", "mlruns"


def names(report_to: Any, image_packages: Mapping[str, str] | None = None) -> list[str]:
    """The trackers a `report_to` value turns on: a name, a list, a comma-separated string; `all` means every
    tracker whose package is there (transformers' get_available_reporting_integrations), `none` none."""
    if report_to is None:
        return []
    items = report_to if isinstance(report_to, (list, tuple)) else str(report_to).split(",")
    words = [str(w).strip() for w in items if str(w).strip()]
    if "none" in words:
        return []
    if "all" in words:
        have = image_packages or {}
        return [n for n, package in PACKAGES.items() if package in have]
    return list(dict.fromkeys(words))


def unknown(report_to: Any) -> list[str]:
    return [n for n in names(report_to) if n not in PACKAGES and n != "all"]


def environment(trackers: list[str], output: str, host_env: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(environment for the job, names passed from the caller's shell by value and never recorded) for the
    trackers a run turns on; `output` is the run's job folder as the job sees it."""
    env = {n: host_env[n] for n in PASSED if host_env.get(n) and any(n.startswith(t.upper()) for t in trackers)}
    by_name: tuple[str, ...] = ()
    if "tensorboard" in trackers:
        env["TENSORBOARD_LOGGING_DIR"] = f"{output}/{TB_DIR}"
    if "wandb" in trackers:
        env["WANDB_DIR"] = output  # wandb adds its own `wandb/` folder
        if not host_env.get("WANDB_API_KEY") and not host_env.get("WANDB_MODE"):
            env["WANDB_MODE"] = "offline"
    if "mlflow" in trackers:
        if host_env.get("MLFLOW_TRACKING_URI"):
            by_name = ("MLFLOW_TRACKING_URI",)
        else:
            env["MLFLOW_TRACKING_URI"] = f"{output}/{MLFLOW_DIR}"
            env["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return env, by_name


def key_warnings(file: str, trackers: list[str], host_env: Mapping[str, str], output: str) -> list[Problem]:
    """One line per tracker whose key is not exported: what it does instead."""
    out = []
    for tracker in trackers:
        key = KEYS.get(tracker)
        if not key or host_env.get(key):
            continue
        if tracker == "wandb":
            mode = host_env.get("WANDB_MODE")
            if mode:
                continue  # the user chose the mode (offline, disabled) themselves
            out.append(Problem(file, "llamafactory.report_to", f"{key} is not exported: W&B runs offline "
                               f"(WANDB_MODE=offline) into {output}/{WANDB_DIR}",
                               f"`wandb sync {output}/{WANDB_DIR}/offline-run-*` uploads it later; export {key} "
                               "to log online", severity="warning"))
        else:
            out.append(Problem(file, "llamafactory.report_to", f"{key} is not exported: {tracker} cannot log to "
                               "its service", f"export {key} in your shell", severity="warning"))
    return out


def where(trackers: list[str], env: Mapping[str, str]) -> list[str]:
    """Where each tracker of a run went, from the environment its launch plan recorded (plan.json)."""
    out = []
    for tracker in trackers:
        if tracker == "tensorboard":
            out.append(f"tensorboard {env.get('TENSORBOARD_LOGGING_DIR', 'output/runs')}")
        elif tracker == "wandb":
            mode = env.get("WANDB_MODE", "online")
            out.append(f"wandb {mode} {env.get('WANDB_DIR', '.')}/{WANDB_DIR}")
        elif tracker == "mlflow":
            out.append(f"mlflow {env.get('MLFLOW_TRACKING_URI', 'your MLFLOW_TRACKING_URI')}")
        else:
            out.append(tracker)
    return out
