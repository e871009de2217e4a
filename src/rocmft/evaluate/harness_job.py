"""`python -m rocmft.evaluate.harness_job --spec-file=PATH`: lm-evaluation-harness on the base and the tuned model
(rocmft.evaluate.harness_plan), run where the run trained (this venv or the arch's image). Prints one JSON object on
stdout — {"problems": [...]} (exit 2) when a task is unknown or its data cannot be had, else each side's results;
every library line goes to stderr, as in evaluate/job.py. The spec comes in a private file, never in argv.

The tasks are resolved and their datasets loaded before any model is, so a typo or an offline machine costs
seconds, not a model load (harness_data.py: a group YAML by its group's name, a missing Hub dataset named first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..serve.private_file import read
from . import harness_data, harness_names

EXIT_INVALID = 2


def resolve_tasks(spec: dict[str, Any], offline: bool = False):
    """(task manager, the task list for simple_evaluate, problems). One problem line per task that is unknown or
    whose data could not be loaded; a Hub dataset an offline machine lacks is named before any load is tried."""
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=spec["include_paths"])
    known = set(manager.all_tasks)
    problems: list[str] = []
    wanted: list[str] = []  # task names and task YAML paths, as the harness takes both
    asked: dict[str, str] = {}  # what the harness is given -> what the user typed (for the fix)
    for name in spec["tasks"]:
        if name in known:
            wanted.append(name)
            asked[name] = name
            continue
        problems.append(f"TASKS: {harness_names.unknown(name, known)}")
    for path in spec["task_files"]:  # the harness takes a task YAML's path as a task (TaskManager._load_spec)
        if not os.path.isfile(path):
            problems.append(f"TASKS: {path}: no such task file here (the job reads paths from the project root)")
            continue
        group = harness_data.group_name(path)  # ... but a group YAML by its group's name only
        if group is not None and group not in known:
            problems.append(f"TASKS: {path} defines group `{group}`, which the harness did not index from its folder: "
                            f"pass TASKS={group} with the folder among the include paths")
            continue
        wanted.append(group or path)
        asked[group or path] = path
    if problems:
        return manager, wanted, problems
    env = os.environ
    where = env.get("HF_HOME") or "~/.cache/huggingface"
    for item in wanted:  # each one alone, to name the one whose data is missing
        hub = harness_data.hub_datasets(manager, item)
        fetch = f"make fetch TASKS={asked[item]} downloads it into HF_HOME ({where}) on a machine with internet"
        missing = [d for d in hub if not harness_data.cached(d, env)] if offline else []
        if missing:
            problems.append(f"TASKS: `{asked[item]}`: its dataset {', '.join(missing)} is not in the Hugging Face cache "
                            f"and this machine cannot reach the Hub ({fetch})")
            continue
        try:
            get_task_dict([item], manager)
        except Exception as exc:  # noqa: BLE001 - datasets/hub errors have many types; each becomes one line
            reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            fix = fetch if hub else "check the task's dataset_path and data_files (paths are read from the project root)"
            problems.append(f"TASKS: `{asked[item]}`: its dataset could not be loaded"
                            f"{' on this offline machine' if offline else ''}: {reason} ({fix})")
    return manager, wanted, problems


def load_side(side: dict[str, Any], device: str):
    """The model of one side: its weights, then each adapter of the chain merged in, in order."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(side["model"], dtype=dtype,
                                                 trust_remote_code=side["trust_remote_code"])
    for adapter in side["adapters"]:
        from peft import PeftModel

        print(f"[rocmft] harness: adapter {adapter} merged", file=sys.stderr, flush=True)
        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(side["tokenizer"], trust_remote_code=side["trust_remote_code"])
    return model.to(device).eval(), tokenizer


def evaluate_side(spec: dict[str, Any], who: str, manager, wanted) -> dict[str, Any]:
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    side = spec["sides"][who]
    print(f"[rocmft] harness: {who} = {side['model']}"
          f"{' + ' + ', '.join(side['adapters']) if side['adapters'] else ''}", file=sys.stderr, flush=True)
    model, tokenizer = load_side(side, spec["device"])
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=spec["batch_size"], device=spec["device"])
    out = lm_eval.simple_evaluate(model=lm, tasks=list(wanted), num_fewshot=spec["fewshot"], limit=spec["limit"],
                                  task_manager=manager, apply_chat_template=True, log_samples=False)
    del lm, model
    return {"results": out.get("results", {}), "higher_is_better": out.get("higher_is_better", {}),
            "n_samples": out.get("n-samples", {}), "versions": out.get("versions", {}),
            "lm_eval": getattr(lm_eval, "__version__", "")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmft.evaluate.harness_job")
    parser.add_argument("--spec-file", required=True, help="the plan as JSON (rocmft.evaluate.harness_plan)")
    spec = json.loads(read(parser.parse_args(argv).spec_file))

    answer_fd = os.dup(1)
    os.dup2(2, 1)  # libraries that hold sys.stdout print to stderr; stdout carries the JSON alone
    code, answer = 0, {}
    offline = harness_data.go_offline_when_unreachable(os.environ)  # before the hub libraries read it
    try:
        manager, wanted, problems = resolve_tasks(spec, offline)
        if problems:
            code, answer = EXIT_INVALID, {"problems": problems}
        else:
            answer = {who: evaluate_side(spec, who, manager, wanted) for who in ("base", "tuned")}
    finally:
        sys.stdout.flush()
        os.dup2(answer_fd, 1)
        os.close(answer_fd)
    print(json.dumps(answer, default=str), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
