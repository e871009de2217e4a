"""`make fetch`: what a recipe needs from the Hub, and the command that downloads it.

The Hub is not reachable here: the plans (argv, environment, the token by name) are checked as data. The offline
paths run for real: `rocmft fetch` starts the worker (huggingface_hub.snapshot_download) against a tmp HF_HOME
holding the tiny model in the Hub cache layout (hit), and against one that lacks the repo (miss).
"""

from __future__ import annotations

import json
import shutil

from rocmft import fetch, hubcache, paths
from rocmft.fetch import Target
from tests.conftest import PYTHON, rocmft

REPO = "meta-llama/Meta-Llama-3-8B-Instruct"


def test_a_local_model_needs_no_fetch_and_a_hub_id_does():
    found, notes = fetch.targets({"model_name_or_path": "models/tiny-llama", "dataset": "demo_alpaca"}, paths.root())
    assert found == [] and notes == ["model `models/tiny-llama` is a local path: nothing to fetch"]
    found, _ = fetch.targets({"model_name_or_path": REPO}, paths.root())
    assert found == [Target(REPO, "model")]


def test_hub_datasets_are_fetched_too(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dataset_info.json").write_text(json.dumps({
        "alpaca_hub": {"hf_hub_url": "llamafactory/alpaca_en"}, "local": {"file_name": "x.jsonl"}}))
    args = {"model_name_or_path": "org/m", "dataset": "alpaca_hub,local", "eval_dataset": "alpaca_hub"}
    assert fetch.targets(args, tmp_path)[0] == [Target("org/m", "model"), Target("llamafactory/alpaca_en", "dataset")]
    online = {**args, "dataset_dir": "ONLINE", "dataset": "tatsu-lab/alpaca", "eval_dataset": ""}
    assert fetch.targets(online, tmp_path)[0][1:] == [Target("tatsu-lab/alpaca", "dataset")]
    remote = {**args, "dataset_dir": "REMOTE:llamafactory/demo_data"}
    assert fetch.targets(remote, tmp_path)[0][1:] == [Target("llamafactory/demo_data", "dataset")]


def test_venv_plan_names_the_token_and_never_holds_it(tmp_path):
    env = {"HF_TOKEN": "hf_secret_value", "HF_HOME": str(tmp_path / "hf"), "WANDB_API_KEY": "w"}
    plan = fetch.venv_plan([Target(REPO, "model"), Target("org/ds", "dataset")], env, "/venv/bin/python")
    assert plan.argv == ("/venv/bin/python", "-m", "rocmft.fetch_worker", "--model", REPO, "--dataset", "org/ds")
    assert plan.env == {"HF_HOME": str((tmp_path / "hf").resolve())}
    assert plan.secret_env == ("HF_TOKEN",)
    assert "hf_secret_value" not in plan.to_json()


def test_image_plan_mounts_the_cache_where_the_job_does_and_passes_the_token_by_name(tmp_path):
    env = {"HF_TOKEN": "hf_secret_value", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": "/big/hub"}
    plan = fetch.image_plan([Target(REPO, "model")], env, "sha256:abc", tmp_path / "proj", 1000, 1000)
    argv = list(plan.argv)
    hf = str((tmp_path / "hf").resolve())
    assert argv[:3] == ["docker", "run", "--rm"] and "--user=1000:1000" in argv
    assert f"--volume={hf}:{hf}" in argv and "--volume=/big/hub:/big/hub" in argv
    assert f"--volume={tmp_path / 'proj'}:{tmp_path / 'proj'}:ro" in argv
    assert f"--env=HF_HOME={hf}" in argv and "--env=HF_TOKEN" in argv
    assert argv[argv.index("sha256:abc"):] == ["sha256:abc", "python", "-m", "rocmft.fetch_worker", "--model", REPO]
    assert "hf_secret_value" not in " ".join(argv) + plan.to_json()


def _cached_tiny(hf_home, tiny_model, repo="rocmft-test/tiny-llama", commit="a" * 40):
    folder = hf_home / "hub" / hubcache.repo_folder(repo)
    shutil.copytree(tiny_model, folder / "snapshots" / commit)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    return folder / "snapshots" / commit


def test_offline_cache_hit_and_miss_for_real(tmp_path, job_env, tiny_model):
    snapshot = _cached_tiny(tmp_path / "hf", tiny_model)
    env = {**job_env, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "hf_secret_value"}
    hit = rocmft("fetch", "--model", "rocmft-test/tiny-llama", "--runtime", "local", env=env, timeout=300)
    assert hit.returncode == 0, hit.stderr
    assert f"fetched model `rocmft-test/tiny-llama` -> {snapshot}" in hit.stdout
    miss = rocmft("fetch", "--model", "rocmft-test/absent", "--runtime", "local", env=env, timeout=300)
    assert miss.returncode == 2
    assert miss.stderr.strip().splitlines() == [(
        "error: model `rocmft-test/absent` is not in the Hugging Face cache and cannot be downloaded from here "
        "(HF_HUB_OFFLINE=1, or no connection to the Hub): unset HF_HUB_OFFLINE on a machine with internet")]
    assert "hf_secret_value" not in hit.stdout + hit.stderr + miss.stdout + miss.stderr


def test_a_recipe_with_a_local_model_has_nothing_to_fetch_and_bad_input_is_one_line(job_env):
    proc = rocmft("fetch", "tiny-cpu", env=job_env, timeout=120)
    assert proc.returncode == 0 and "nothing to fetch" in proc.stdout
    both = rocmft("fetch", "tiny-cpu", "--model", REPO, env=job_env, timeout=120)
    assert both.returncode == 2 and both.stderr.strip() == "error: MODEL: give a RECIPE or a MODEL, not both"
    none = rocmft("fetch", env=job_env, timeout=120)
    assert none.returncode == 2 and "nothing to fetch" in none.stderr


def test_print_shows_the_plan_of_a_gpu_recipe_without_the_token(job_env, tmp_path):
    env = {**job_env, "HF_TOKEN": "hf_secret_value", "HF_HUB_OFFLINE": "0"}
    proc = rocmft("fetch", "llama3-8b-lora", "--runtime", "local", "--print", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["argv"] == [PYTHON, "-m", "rocmft.fetch_worker", "--model", REPO]
    assert plan["secret_env"] == ["HF_TOKEN"] and "hf_secret_value" not in proc.stdout
