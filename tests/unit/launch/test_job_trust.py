"""A recipe is code: `make train`/`make bench` run a model's remote code, and the endpoints and loaders a recipe's
env sets, only with the user's opt-in; a token never goes to a job whose recipe redirects its service. The
launch plan is tested as data (what each runtime hands the job); the refusals through the real CLI."""

from __future__ import annotations

import http.server

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


@pytest.mark.parametrize("name", ["HF_ENDPOINT", "HF_HUB_ETAG_TIMEOUT", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI", "LD_PRELOAD",
                                  "PYTHONPATH", "BASH_ENV", "ld_library_path", "HTTPS_PROXY", *CERTIFICATES,
                                  # the toolchain a JIT build runs (issue 43, N9): DeepSpeed's op builder and torch's
                                  # cpp_extension find ninja, the compilers and ROCm by these
                                  "PATH", "CC", "CXX", "CPATH", "COMPILER_PATH", "ROCM_PATH", "HIP_PATH", "CFLAGS",
                                  "HIPCC_COMPILE_FLAGS_APPEND", "LIBRARY_PATH"])
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


def test_a_ninja_planted_on_a_recipes_path_never_runs_in_the_job_without_the_opt_in(tmp_path, monkeypatch):
    """N9 (issue 43): `env: {PATH: <folder>:/usr/bin}` put a recipe's `ninja` first, and DeepSpeed's op build (torch's
    cpp_extension: `ninja --version`, then `ninja -v`) ran it. The job's environment is built as RUNTIME=local builds
    it, and ninja is run in it as that build would."""
    import subprocess

    monkeypatch.delenv("TRUST_RECIPE_ENV", raising=False)
    planted = tmp_path / "bin"
    planted.mkdir()
    ran = tmp_path / "ran"
    (planted / "ninja").write_text(f"#!/bin/sh\necho planted > {ran}\necho 1.11.1\n")
    (planted / "ninja").chmod(0o755)
    override = f"env.PATH={planted}:/usr/bin:/bin"
    try:
        prep = pipeline.prepare("tiny-cpu", [override], validate=False, job=True, env={"PATH": "/usr/bin:/bin"})
    except ProblemReport as refused:
        [line] = str(refused).splitlines()
        assert "env.PATH: loads code into the job" in line and "(TRUST_RECIPE_ENV=1 to allow it" in line, line
        return
    job = lp.job_env(lp.build(prep.recipe, prep.arch, "runs/x", {"PATH": "/usr/bin:/bin"}), {"PATH": "/usr/bin:/bin"})
    subprocess.run(["ninja", "--version"], env=job, capture_output=True, check=False)
    assert not ran.exists(), f"the recipe's ninja ran in the job ({job['PATH']})"


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


def test_a_recipe_pointing_mlflow_elsewhere_gets_none_of_the_users_mlflow_credentials():
    mlflow = {"MLFLOW_TRACKING_TOKEN": "mlf_mine", "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "pw"}
    host = {**HOST, **mlflow}
    assert set(mlflow) <= set(plan([], host).secret_env)  # an exported server's credentials reach the job by name
    p = plan(["env.MLFLOW_TRACKING_URI=https://mlflow.example.net"], host)
    assert not set(mlflow) & set(p.secret_env) and set(mlflow) <= set(p.unset_env)
    assert not set(mlflow) & set(lp.job_env(p, host)) and "HF_TOKEN" in p.secret_env
    assert "mlf_mine" not in p.to_json() and "pw" not in p.to_json().replace("pwd", "")


def test_the_user_is_told_which_token_stays_home():
    prep = pipeline.prepare("tiny-cpu", ["env.WANDB_BASE_URL=https://wandb.example.net"], validate=False, job=True,
                            env={"TRUST_RECIPE_ENV": "1", **HOST})
    [warning] = [m for m in prep.messages if m.severity == "warning" and "not passed" in m.message]
    assert warning.message.startswith("WANDB_API_KEY is not passed to this job")


class _RecordingHub(http.server.BaseHTTPRequestHandler):
    """A recipe's HF_ENDPOINT: answers every request with 404 and keeps the Authorization it was sent."""
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        _RecordingHub.seen.append(self.headers.get("Authorization") or "")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def test_the_token_hf_auth_login_stored_never_reaches_a_redirected_endpoint(tmp_path):
    """N5 (issue 43): with no HF_TOKEN exported, huggingface_hub falls back to HF_HOME/token (`hf auth login`),
    which a local or Slurm job inherits with HF_HOME. The job's environment is built as RUNTIME=local builds it
    and the real huggingface_hub asks the recipe's endpoint (a server on 127.0.0.1) for a model; the same call in
    the caller's own environment, to the same server, shows that the file's token is what would be sent."""
    import subprocess
    import sys
    import threading

    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_stored_by_login\n")
    server = http.server.HTTPServer(("127.0.0.1", 0), _RecordingHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    caller = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(hf_home), "NO_PROXY": "127.0.0.1"}
    ask = "from huggingface_hub import HfApi\ntry:\n    HfApi().model_info('org/model')\nexcept Exception:\n    pass\n"
    try:
        subprocess.run([sys.executable, "-c", ask], env={**caller, "HF_ENDPOINT": endpoint}, check=True, timeout=120)
        control = list(_RecordingHub.seen)
        _RecordingHub.seen.clear()
        p = plan([f"env.HF_ENDPOINT={endpoint}"], host=caller)
        subprocess.run([sys.executable, "-c", ask], env=lp.job_env(p, caller), check=True, timeout=120)
        sent = list(_RecordingHub.seen)
    finally:
        server.shutdown()
        server.server_close()
        _RecordingHub.seen.clear()
    assert "Bearer hf_stored_by_login" in control, control  # the attack, for real
    assert sent and not any("hf_stored_by_login" in h for h in sent), f"the stored token went to the recipe's endpoint: {sent}"


def test_a_pushing_recipe_needs_push_to_hub_1_a_public_repo_private_0_and_is_private_by_default(monkeypatch):
    """N3 (issue 43), as data: the refusals (the real job's first request to a Hub: tests/train/test_hub_push_cpu.py)
    and what the opt-in renders."""
    for name in ("PUSH_TO_HUB", "PRIVATE"):
        monkeypatch.delenv(name, raising=False)
    pushing = ["push_to_hub=true", "hub_model_id=me/tuned"]
    with pytest.raises(ProblemReport) as refused:
        pipeline.prepare("tiny-cpu", pushing, validate=False, job=True, env={})
    assert [p.key for p in refused.value.problems] == ["llamafactory.push_to_hub", "llamafactory.hub_model_id"]
    assert all("(PUSH_TO_HUB=1 to allow it" in p.line() for p in refused.value.problems)
    prep = pipeline.prepare("tiny-cpu", pushing, validate=False, job=True, env={"PUSH_TO_HUB": "1"})
    assert prep.rendered.args["hub_private_repo"] is True and "hub_private_repo: true" in prep.rendered.train_yaml
    with pytest.raises(ProblemReport) as public:
        pipeline.prepare("tiny-cpu", [*pushing, "hub_private_repo=false"], validate=False, job=True,
                         env={"PUSH_TO_HUB": "1"})
    [line] = str(public.value).splitlines()
    assert "llamafactory.hub_private_repo: false makes the repo public" in line and "PRIVATE=0" in line
    prep = pipeline.prepare("tiny-cpu", [*pushing, "hub_private_repo=false"], validate=False, job=True,
                            env={"PUSH_TO_HUB": "1", "PRIVATE": "0"})
    assert prep.rendered.args["hub_private_repo"] is False
    # render and plan only read files; a recipe that does not push renders no hub key
    pipeline.prepare("tiny-cpu", pushing, validate=False, env={})
    assert "hub_private_repo" not in pipeline.prepare("tiny-cpu", [], validate=False, env={}).rendered.args


def test_a_job_redirecting_the_hub_reads_no_stored_token_and_sends_none_unasked(tmp_path):
    """N5 (issue 43), in the real huggingface_hub of a job whose recipe redirects the Hub (environment as
    RUNTIME=local builds it): `get_token()` finds nothing though HF_HOME/token holds `hf auth login`'s token
    (HF_TOKEN_PATH=/dev/null), and a request built without a token carries none, even one the job's own code puts
    in HF_TOKEN later (HF_HUB_DISABLE_IMPLICIT_TOKEN); in the caller's environment both find the tokens."""
    import json
    import subprocess
    import sys

    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_stored_by_login\n")
    caller = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    ask = ("import json, os\nfrom huggingface_hub import get_token\nfrom huggingface_hub.utils import build_hf_headers\n"
           "stored = get_token()\nos.environ['HF_TOKEN'] = 'hf_set_in_the_job'\n"
           "print(json.dumps([stored, build_hf_headers().get('authorization')]))\n")

    def tokens(env):
        done = subprocess.run([sys.executable, "-c", ask], env=env, check=True, timeout=120, capture_output=True, text=True)
        return json.loads(done.stdout.splitlines()[-1])

    assert tokens(caller) == ["hf_stored_by_login", "Bearer hf_set_in_the_job"]  # what a job would otherwise find
    p = plan(["env.HF_ENDPOINT=https://hub.example.net"], host=caller)
    assert tokens(lp.job_env(p, caller)) == [None, None]
