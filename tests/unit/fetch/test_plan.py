"""`make fetch`: what a recipe needs from the Hub, and the command that downloads it.

The Hub is not reachable here: the plans (argv, environment, the token by name) are checked as data. The offline
paths run for real: `rocmft fetch` starts the worker (huggingface_hub.snapshot_download) against a tmp HF_HOME
holding the tiny model in the Hub cache layout (hit), and against one that lacks the repo (miss).
"""

from __future__ import annotations

import json
import shutil

from rocmft.fetch import plan as fetch
from rocmft.fetch.plan import Target
from rocmft.io import hubcache, paths
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
    assert plan.argv == ("/venv/bin/python", "-m", "rocmft.fetch.worker", "--model", REPO, "--dataset", "org/ds")
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
    assert argv[argv.index("sha256:abc"):] == ["sha256:abc", "python", "-m", "rocmft.fetch.worker", "--model", REPO]
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
    assert plan["argv"] == [PYTHON, "-m", "rocmft.fetch.worker", "--model", REPO]
    assert plan["secret_env"] == ["HF_TOKEN"] and "hf_secret_value" not in proc.stdout


# ---- TASKS=: lm-evaluation-harness benchmarks' datasets (`make eval TASKS=` reads them offline)
# The Hub is not reachable here: mmlu/arc_easy are checked as the plan (argv, HF_HOME) the CLI hands the worker.
# The project's own local-JSONL task (eval_tasks/rocmft_demo) and the unknown-name path run for real, offline.

def test_tasks_plan_as_data_names_each_task_and_the_projects_task_folder_and_the_eval_hf_home(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "hf_secret_value", "HF_DATASETS_OFFLINE": "0"}
    found = fetch.task_targets("mmlu, arc_easy,,mmlu", tmp_path)
    assert found == [Target("mmlu", "task"), Target("arc_easy", "task")]
    plan = fetch.venv_plan(found, env, "/venv/bin/python", paths.root())
    assert plan.argv == ("/venv/bin/python", "-m", "rocmft.fetch.worker", "--task", "mmlu", "--task", "arc_easy",
                         "--include-path", str(paths.root() / "eval_tasks"))
    assert plan.env == {"HF_HOME": str((tmp_path / "hf").resolve()), "HF_DATASETS_OFFLINE": "0"}
    assert plan.secret_env == ("HF_TOKEN",) and "hf_secret_value" not in plan.to_json()


def test_a_task_yaml_is_handed_over_by_its_absolute_path_and_the_image_plan_sees_the_same_paths(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "held_out.yaml").write_text("task: held_out\n")
    found = fetch.task_targets("mine/held_out.yaml,arc_easy", tmp_path)
    assert found == [Target(str(tmp_path / "mine" / "held_out.yaml"), "task"), Target("arc_easy", "task")]
    plan = fetch.image_plan(found, {"HF_HOME": str(tmp_path / "hf")}, "sha256:abc", tmp_path, 1000, 1000)
    argv = list(plan.argv)
    assert argv[argv.index("sha256:abc"):] == [
        "sha256:abc", "python", "-m", "rocmft.fetch.worker", "--task", str(tmp_path / "mine" / "held_out.yaml"),
        "--task", "arc_easy", "--include-path", str(tmp_path / "eval_tasks")]
    assert f"--volume={tmp_path}:{tmp_path}:ro" in argv  # the project (its eval_tasks/) at the same path


def test_print_of_make_fetch_tasks_with_a_recipe_plans_the_model_and_the_tasks(job_env):
    env = {**job_env, "HF_HUB_OFFLINE": "0"}
    proc = rocmft("fetch", "llama3-8b-lora", "--tasks", "mmlu,arc_easy", "--runtime", "local", "--print", env=env,
                  timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["argv"] == [PYTHON, "-m", "rocmft.fetch.worker", "--model", REPO, "--task", "mmlu", "--task", "arc_easy",
                            "--include-path", str(paths.root() / "eval_tasks")]
    assert plan["env"]["HF_HOME"] == job_env["HF_HOME"]


def test_fetch_tasks_of_the_shipped_local_jsonl_task_runs_offline_for_real(job_env, tmp_path):
    env = {**job_env, "HF_HOME": str(tmp_path / "hf")}
    proc = rocmft("fetch", "--tasks", "rocmft_demo", "--runtime", "local", env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines() == [f"fetched task `rocmft_demo` (2 tasks, json) -> {tmp_path / 'hf' / 'datasets'}"]
    assert list((tmp_path / "hf" / "datasets").glob("json/*"))  # the harness's load wrote datasets' cache there


def test_fetch_tasks_unknown_name_is_one_line_with_the_harness_closest_names_exit_2_before_any_download(job_env, tmp_path):
    env = {**job_env, "HF_HOME": str(tmp_path / "hf")}
    proc = rocmft("fetch", "--tasks", "rocmft_demo,arc_esy", "--runtime", "local", env=env, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: TASKS: `arc_esy` is not an lm-evaluation-harness task or group "
                           "(the harness's closest: arc_easy, ") and line.endswith(")"), line
    assert not (tmp_path / "hf" / "datasets").exists()  # the known one was not fetched either


def test_fetch_tasks_offline_cache_miss_is_one_line_naming_the_dataset(job_env, tmp_path):
    env = {**job_env, "HF_HOME": str(tmp_path / "hf")}
    proc = rocmft("fetch", "--tasks", "arc_easy", "--runtime", "local", env=env, timeout=300)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: task `arc_easy`: its dataset is not in the Hugging Face cache") and \
        "'allenai/ai2_arc'" in line and "`make fetch TASKS=arc_easy`" in line, line
