"""`python -m rocmft.fetch.worker --model ORG/NAME [--dataset ORG/NAME ...] [--task NAME ... --include-path DIR]`:
the download `make fetch` plans (rocmft.fetch.plan), run where huggingface_hub and lm_eval are (the training venv or
the image).

huggingface_hub.snapshot_download into the HF cache: its tqdm bars show progress, and an interrupted download
resumes from its `.incomplete` blobs. The token is huggingface_hub's own lookup (HF_TOKEN from the environment,
then the `hf auth login` file): never on a command line, never written. Each failure is one line and exit 2.

A benchmark (`--task`, lm-evaluation-harness's name of a task, group or tag, or a task YAML) is fetched the way
the eval will read it: the harness's TaskManager builds the task, and building it runs the task's own
`download()` (datasets.load_dataset of its dataset_path/dataset_name with its dataset_kwargs) into HF_HOME's
datasets cache, where the eval, offline, then finds it. Every name is checked before anything downloads.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..evaluate import harness_data, harness_names
from ..evaluate.harness_plan import TASK_FILE_SUFFIXES
from ..io.safe_text import one_line

# A model repo often carries other formats of the same weights that LLaMA-Factory never reads (Llama-3's
# original/consolidated.*.pth doubles the download: 16 GB for the 8B).
MODEL_IGNORE = ["original/*", "*.pth", "*.gguf", "*.onnx", "*.onnx_data", "*.h5", "*.msgpack", "*.tflite", "*.ot"]


def fetch(repo_id: str, repo_type: str) -> tuple[int, str]:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    what = f"{repo_type} `{repo_id}`"
    try:
        path = snapshot_download(repo_id, repo_type=repo_type,
                                 ignore_patterns=MODEL_IGNORE if repo_type == "model" else None)
    except GatedRepoError:
        return 2, (f"error: {what} is gated: accept its license at https://huggingface.co/"
                   f"{'datasets/' if repo_type == 'dataset' else ''}{repo_id} and export HF_TOKEN=<a read token of that account>")
    except RepositoryNotFoundError:
        return 2, f"error: no {what} on the Hub that this token can read (check the spelling; a private repo needs HF_TOKEN)"
    except LocalEntryNotFoundError:
        return 2, (f"error: {what} is not in the Hugging Face cache and cannot be downloaded from here "
                   "(HF_HUB_OFFLINE=1, or no connection to the Hub): unset HF_HUB_OFFLINE on a machine with internet")
    except HfHubHTTPError as exc:
        return 2, f"error: the Hub refused {what}: {str(exc).splitlines()[0]}"
    return 0, f"fetched {what} -> {path}"


def task_manager(include_path: list[str]):
    before = dict(os.environ)
    from lm_eval.tasks import TaskManager

    # Importing lm_eval turns on HF_HUB_ENABLE_HF_TRANSFER and HF_XET_HIGH_PERFORMANCE for this process (its
    # __init__): the model downloads after it keep the caller's own settings.
    for name in set(os.environ) - set(before):
        del os.environ[name]
    return TaskManager(include_path=[p for p in include_path if os.path.isdir(p)] or None)


def unknown_tasks(names: list[str], known: list[str]) -> list[str]:
    """One line per name the harness does not know (a task YAML path is known when the file exists)."""
    return [f"error: TASKS: {harness_names.unknown(name, known)}" for name in names
            if name not in known and not (name.endswith(TASK_FILE_SUFFIXES) and os.path.isfile(name))]


def fetch_task(manager, name: str) -> tuple[int, str]:
    """Build the task (group: every task in it) as the eval does; building downloads its datasets. A group YAML
    is built by its group's name, as the eval hands it over (evaluate/harness_data.py)."""
    what = f"task `{name}`"
    group = harness_data.group_name(name) if name.endswith(TASK_FILE_SUFFIXES) and os.path.isfile(name) else None
    try:
        built = manager.load([group or name])
    except (ConnectionError, OSError) as exc:  # datasets' offline or unreachable Hub: it names the dataset
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return 2, (f"error: {what}: its dataset is not in the Hugging Face cache ({_datasets_cache()}) and cannot be "
                   f"downloaded from here: {first}; run `make fetch TASKS={name}` on a machine with internet, "
                   "into the HF_HOME the eval uses")
    except Exception as exc:  # noqa: BLE001 - a broken task YAML, a dataset script: the harness's words, one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        return 2, f"error: {what} could not be loaded: {type(exc).__name__}: {first}"
    tasks = built["tasks"]
    datasets = sorted({f"{t.DATASET_PATH}" + (f" ({t.DATASET_NAME})" if t.DATASET_NAME else "")
                       for t in tasks.values()})
    shown = ", ".join(datasets[:4]) + (f", +{len(datasets) - 4} more" if len(datasets) > 4 else "")
    count = f"{len(tasks)} tasks, " if len(tasks) != 1 else ""
    return 0, f"fetched {what} ({count}{shown}) -> {_datasets_cache()}"


def _datasets_cache() -> str:
    from datasets import config

    return str(config.HF_DATASETS_CACHE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--dataset", action="append", default=[])
    parser.add_argument("--task", action="append", default=[])
    parser.add_argument("--include-path", action="append", default=[])
    args = parser.parse_args(argv)
    manager = None
    if args.task:  # every name checked before any download starts
        manager = task_manager(args.include_path)
        unknown = unknown_tasks(args.task, manager.all_tasks)
        for line in unknown:
            print(one_line(line), file=sys.stderr, flush=True)
        if unknown:
            return 2
    worst = 0
    for repo_type, repos in (("model", args.model), ("dataset", args.dataset)):
        for repo in repos:
            code, line = fetch(repo, repo_type)
            print(one_line(line), file=sys.stderr if code else sys.stdout, flush=True)
            worst = max(worst, code)
    for name in args.task:
        code, line = fetch_task(manager, name)  # a task file's names and dataset paths: escaped (issue 43, L6)
        print(one_line(line), file=sys.stderr if code else sys.stdout, flush=True)
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
