"""A recipe is code: `make train`/`make bench` run a model's remote code, and the endpoints and loaders a recipe's
env sets, only with the user's opt-in; a token never goes to a job whose recipe redirects its service. The
launch plan is tested as data (what each runtime hands the job); the refusals through the real CLI."""

from __future__ import annotations

import pytest

from rocmft import pipeline
from rocmft.hardware import arches
from rocmft.io.problems import ProblemReport
from rocmft.launch import k8s
from rocmft.launch import plan as lp
from rocmft.recipe import recipes
from tests.conftest import rocmft

CERTIFICATES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE")
HOST = {"HF_TOKEN": "hf_mine", "HUGGING_FACE_HUB_TOKEN": "hf_mine", "WANDB_API_KEY": "wandb_mine", "PATH": "/usr/bin"}


def plan(overrides, host=HOST):
    recipe = recipes.load("tiny-cpu", list(overrides))
    return lp.build(recipe, arches.table()[recipe.arch], "runs/x", host, python="python")


@pytest.mark.parametrize("command", ["train", "bench"])
def test_a_trust_remote_code_recipe_without_the_opt_in_is_refused(command, job_env, tmp_path, tiny_model):
    job_env.pop("TRUST_REMOTE_CODE", None)
    proc = rocmft(command, "tiny-cpu", "--runtime", "local", "trust_remote_code=true", env=job_env)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: recipes/tiny-cpu.yaml: llamafactory.trust_remote_code: the recipe loads its model "
                           "with trust_remote_code: true") and "(TRUST_REMOTE_CODE=1 to allow it" in line, line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("name", ["HF_ENDPOINT", "HF_HUB_ETAG_TIMEOUT", "WANDB_BASE_URL", "LD_PRELOAD", "PYTHONPATH",
                                  "BASH_ENV", "ld_library_path", "HTTPS_PROXY", *CERTIFICATES])
def test_endpoint_and_loader_variables_in_a_recipe_need_the_opt_in(name, monkeypatch):
    monkeypatch.delenv("TRUST_RECIPE_ENV", raising=False)
    with pytest.raises(ProblemReport) as refused:
        pipeline.prepare("tiny-cpu", [f"env.{name}=/tmp/x"], validate=False, job=True, env={})
    [line] = str(refused.value).splitlines()
    assert f"env.{name}: " in line and "(TRUST_RECIPE_ENV=1 to allow it" in line
    prep = pipeline.prepare("tiny-cpu", [f"env.{name}=/tmp/x"], validate=False, job=True, env={"TRUST_RECIPE_ENV": "1"})
    assert prep.recipe.env[name] == "/tmp/x"
    # render and plan only read files: no opt-in asked
    pipeline.prepare("tiny-cpu", [f"env.{name}=/tmp/x"], validate=False, env={})


def test_an_ordinary_env_variable_needs_no_opt_in():
    prep = pipeline.prepare("tiny-cpu", ["env.OMP_NUM_THREADS=2"], validate=False, job=True, env={})
    assert not [m for m in prep.messages if m.severity == "error"]


def test_a_recipe_redirecting_the_hub_gets_no_hub_token_even_with_the_opt_in():
    p = plan(["env.HF_ENDPOINT=https://hub.example.net"])
    assert p.env["HF_ENDPOINT"] == "https://hub.example.net"
    assert "HF_TOKEN" not in p.secret_env and "HUGGING_FACE_HUB_TOKEN" not in p.secret_env
    assert {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} <= set(p.unset_env)
    job = lp.job_env(p, HOST)  # RUNTIME=local: the caller's environment minus the plan's unset names
    assert "HF_TOKEN" not in job and "HUGGING_FACE_HUB_TOKEN" not in job
    assert "WANDB_API_KEY" in p.secret_env and job["WANDB_API_KEY"] == "wandb_mine"  # another service's stays
    pod, _ = k8s.pod_env(p, k8s.Path("/project"), "rocmft-secrets")
    assert "HF_TOKEN" not in {item["name"] for item in pod} and "WANDB_API_KEY" in {item["name"] for item in pod}
    assert "hf_mine" not in p.to_json()


def test_a_recipe_naming_the_token_as_its_own_secret_still_does_not_get_it():
    p = plan(["env.HF_ENDPOINT=https://hub.example.net", "secrets=[HF_TOKEN]"])
    assert "HF_TOKEN" not in p.secret_env and "HF_TOKEN" not in lp.job_env(p, HOST)


@pytest.mark.parametrize("name", CERTIFICATES)
def test_replaced_certificates_withhold_every_token_and_a_plain_recipe_gets_them_all(name):
    """requests reads REQUESTS_CA_BUNDLE (and CURL_CA_BUNDLE), OpenSSL (so httpx, huggingface_hub's transport, and
    curl) SSL_CERT_FILE / SSL_CERT_DIR: each one decides who may answer for every host."""
    p = plan([f"env.{name}=/tmp/ca.pem"])
    assert not {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"} & set(p.secret_env)
    assert {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"} <= set(p.unset_env)
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & set(lp.job_env(p, HOST))
    assert {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"} <= set(plan([]).secret_env)
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & set(plan([]).unset_env)


def test_the_user_is_told_which_token_stays_home():
    prep = pipeline.prepare("tiny-cpu", ["env.WANDB_BASE_URL=https://wandb.example.net"], validate=False, job=True,
                            env={"TRUST_RECIPE_ENV": "1", **HOST})
    [warning] = [m for m in prep.messages if m.severity == "warning" and "not passed" in m.message]
    assert warning.message.startswith("WANDB_API_KEY is not passed to this job")
