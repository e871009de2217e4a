"""Pure: what `make eval TASKS=...` runs, as data: EleutherAI's lm-evaluation-harness on the run's model and on
its base alone, with the same task settings, where the run trained (rocmft.evaluate.harness_job runs it).

- TASKS: harness task or group names (mmlu, arc_easy, ...) and/or paths to task YAMLs in the harness's own format
  (a team's held-out set, a regression suite). A YAML's folder is handed to the harness as an include path, as is
  the project's `eval_tasks/` (the demo's tasks). A task's `data_files` are read from the project root, where the
  job runs (in the venv and in the container, whose working directory is the mounted checkout).
- Base = the model the run trained on, no adapter. Tuned = base + every adapter of the run's chain in order (a
  run started FROM= an SFT run: the SFT adapter, then its own), or its merged export / full weights.
- The tokenizer is the run's: LLaMA-Factory saved it with the chat template the run trained with
  (chat_template.jinja), and both sides are asked through that template (the harness's apply_chat_template), so
  base and tuned differ only in their weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io.problems import Problem, ProblemReport
from ..run.target import Target

SHIPPED_TASKS = "eval_tasks"  # the project's own tasks (eval_tasks/rocmft_demo: the demo's identity question)
# A task YAML is code (issue 43, N2): `!function utils.x` imports the Python beside it, and its Jinja templates render
# in the harness's unsandboxed environment. One that is not the project's own (under eval_tasks/) runs in the run's
# container (RUNTIME=docker: the checkout read-only, no credential of the host), or here only with this opt-in.
TASK_CODE_OPT_IN = "TRUST_TASK_CODE"
TASK_FILE_SUFFIXES = (".yaml", ".yml")  # a task in the harness's own YAML format, by its path
# CPU: a fixed small batch (the harness's `auto` probes for the largest batch that fits a GPU's memory by trying
# and catching CUDA out-of-memory errors, which a CPU never raises); a GPU: `auto`, as the harness recommends.
CPU_BATCH = 8
GPU_BATCH = "auto"


@dataclass(frozen=True)
class HarnessPlan:
    target: Target
    tasks: tuple[str, ...]  # task or group names, the YAMLs' names once the harness reads them
    task_files: tuple[str, ...]  # the YAML paths given, relative to the project root when inside it
    include_paths: tuple[str, ...]
    limit: int | None
    fewshot: int | None
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)  # "base"/"tuned" -> model, adapters, tokenizer
    batch_size: int | str = CPU_BATCH
    device: str = "cpu"

    def spec(self) -> dict[str, Any]:
        """What the job reads (in a private file, never argv)."""
        return {"tasks": list(self.tasks), "task_files": list(self.task_files),
                "include_paths": list(self.include_paths), "limit": self.limit, "fewshot": self.fewshot,
                "batch_size": self.batch_size, "device": self.device, "sides": self.sides}

    @property
    def task_list(self) -> str:
        """TASKS as the user would type it again (`make fetch TASKS=...`)."""
        return ",".join([*self.tasks, *self.task_files])


def _count(value: str | int | None, name: str, example: str, minimum: int) -> tuple[int | None, list[Problem]]:
    text = str(value).strip() if value is not None else ""
    if not text:
        return None, []
    if not text.isdigit() or int(text) < minimum:
        what = "a positive whole number" if minimum else "a whole number (0 or more)"
        return None, [Problem("", name, f"`{text}` is not {what}", example)]
    return int(text), []


def parse_tasks(text: str | None, root: Path) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...],
                                                         list[Problem]]:
    """TASKS=a,b,path/x.yaml -> (names, yaml files, include paths, problems). Names are checked by the harness
    in the job (it knows its ~10,000 tasks; the host imports none of it); files are checked here."""
    problems: list[Problem] = []
    names: list[str] = []
    files: list[str] = []
    includes: list[str] = [SHIPPED_TASKS]
    items = [item.strip() for item in (text or "").split(",") if item.strip()]
    if not items:
        problems.append(Problem("", "TASKS", "no task named",
                                "e.g. TASKS=rocmft_demo, TASKS=mmlu,arc_easy,hellaswag,gsm8k, or TASKS=path/to/task.yaml"))
    for item in items:
        if item.endswith(TASK_FILE_SUFFIXES) or "/" in item:
            path = Path(item).expanduser()
            full = path if path.is_absolute() else root / path
            if not full.is_file():
                problems.append(Problem("", "TASKS", f"`{item}`: no such task file",
                                        "a task YAML in lm-evaluation-harness's format (eval_tasks/rocmft_demo/ "
                                        "holds examples), its path from the project root"))
                continue
            try:
                shown = str(full.resolve().relative_to(root.resolve()))
            except ValueError:
                shown = str(full.resolve())
            files.append(shown)
            folder = str(Path(shown).parent)
            if folder not in includes:
                includes.append(folder)
        elif item not in names:
            names.append(item)
    return tuple(names), tuple(files), tuple(includes), problems


def foreign_files(files: tuple[str, ...] | list[str], root: Path) -> list[str]:
    """The task YAMLs that are not the project's own (eval_tasks/): each is code from elsewhere."""
    own = (root / SHIPPED_TASKS).resolve()
    return [f for f in files if not (root / f).resolve().is_relative_to(own)]


def task_code_problems(files: tuple[str, ...] | list[str], root: Path, env, where: str) -> list[Problem]:
    """One line per foreign task YAML that would run on this host (`where`: what runs it) without the opt-in."""
    if env.get(TASK_CODE_OPT_IN, "").strip().lower() in ("1", "yes", "true"):
        return []
    return [Problem("", "TASKS", f"`{path}` is a task YAML from outside eval_tasks/: its `!function` Python and "
                    f"templates would run as you {where}",
                    f"{TASK_CODE_OPT_IN}=1 to allow it for this command, if you trust that file (RUNTIME=docker runs "
                    "it in the run's container)") for path in foreign_files(files, root)]


def _tokenizer_of(target: Target) -> str:
    """The tokenizer saved beside the run's weights (its chat template is the one the run trained with)."""
    if target.adapter:
        return target.adapter.split(",")[-1]
    return target.model


@dataclass(frozen=True)
class Settings:
    tasks: tuple[str, ...]
    task_files: tuple[str, ...]
    include_paths: tuple[str, ...]
    limit: int | None
    fewshot: int | None


def settings(*, tasks: str | None, limit: str | int | None, fewshot: str | int | None, root: Path) -> Settings:
    """The command line's task settings, or every problem with them at once."""
    names, files, includes, problems = parse_tasks(tasks, root)
    n_limit, more = _count(limit, "LIMIT", "LIMIT=N rows per task, e.g. LIMIT=100 for a quick look", 1)
    problems += more
    n_fewshot, more = _count(fewshot, "FEWSHOT", "FEWSHOT=K examples in each prompt, e.g. FEWSHOT=5 (0: none)", 0)
    problems += more
    if problems:
        raise ProblemReport(problems)
    return Settings(names, files, includes, n_limit, n_fewshot)


def where_problems(target: Target, chosen: Settings, runtime: str, root: Path, env) -> list[Problem]:
    """What this run and runtime cannot do with these tasks: one line each."""
    problems = []
    if runtime == "local":
        problems += task_code_problems(chosen.task_files, root, env, "on this host (RUNTIME=local)")
    if target.adapter and target.carried.get("quantization_bit"):
        problems.append(Problem("", "RUN", f"{target.run_path} is a quantized (QLoRA) run: the harness would load "
                                "its base in full precision, not the 4-bit base its adapter trained on",
                                f"make export RUN={target.name}, then make eval RUN={target.name} TASKS=... scores "
                                "the merged export"))
    if runtime == "docker":
        for path in chosen.task_files:
            if Path(path).is_absolute():
                problems.append(Problem("", "TASKS", f"`{path}` is outside the project: the container sees only "
                                        "the checkout", "copy the task YAML and its data into the project"))
    return problems


def build(target: Target, train: dict[str, Any], chosen: Settings, *, gpu: bool) -> HarnessPlan:
    tokenizer = _tokenizer_of(target)
    base = str(train.get("model_name_or_path") or target.model)
    common = {"tokenizer": tokenizer, "trust_remote_code": bool(target.carried.get("trust_remote_code"))}
    sides = {"base": {"model": base, "adapters": [], **common},
             "tuned": {"model": target.model, "adapters": target.adapter.split(",") if target.adapter else [],
                       **common}}
    return HarnessPlan(target, chosen.tasks, chosen.task_files, chosen.include_paths, chosen.limit,
                       chosen.fewshot, sides, GPU_BATCH if gpu else CPU_BATCH, "cuda" if gpu else "cpu")
