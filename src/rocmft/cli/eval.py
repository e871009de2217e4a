"""`rocmft eval RUN [--data NAME] [--rows N]`: did training help? The run against its base model on held-out
rows, by LLaMA-Factory's own eval and predict (rocmft.evaluate), where the run trained (this venv or the
arch's container, as `make chat`). Writes eval.json and eval.md into the run dir.

`rocmft eval RUN --tasks mmlu,arc_easy,path/task.yaml [--limit N] [--fewshot K]`: the same comparison on
benchmarks, by EleutherAI's lm-evaluation-harness (rocmft.evaluate.harness_*), same runtimes, same files (its
own section of them)."""

from __future__ import annotations

from .common import add_where_arguments

HELP = ("compare a run with its base model on held-out rows (eval loss, perplexity, BLEU-4/ROUGE), or on "
        "lm-evaluation-harness tasks (--tasks)")


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last` (the newest run)")
    parser.add_argument("--data", default=None,
                        help="a registered dataset to evaluate on (default: the rows the run held out, val_size)")
    parser.add_argument("--rows", default=None, help="generate answers for at most this many rows (default 50)")
    parser.add_argument("--tasks", default=None,
                        help="lm-evaluation-harness tasks/groups and task YAML paths, comma-separated (e.g. "
                             "rocmft_demo, mmlu,arc_easy,hellaswag,gsm8k): benchmarks instead of held-out rows")
    parser.add_argument("--limit", default=None, help="--tasks: at most N rows per task (a quick look)")
    parser.add_argument("--fewshot", default=None, help="--tasks: K examples in each prompt (default: each task's)")
    add_where_arguments(parser, "where the run trained", "show LLaMA-Factory's log")


def plan_for(args, env=None):
    """Every check of the command line, all problems at once; nothing starts. -> (session, EvalPlan)."""
    import yaml

    from ..evaluate import plan as eval_plan
    from ..io import datadirs, paths
    from ..io.problems import Problem, ProblemReport
    from ..serve import session

    problems: list[Problem] = []
    rows = s = None
    try:
        rows = eval_plan.parse_rows(args.rows)
    except ProblemReport as report:
        problems += report.problems
    try:
        s = session.for_run(args.run, "", args.runtime, args.gpus, env)
    except ProblemReport as report:
        problems += report.problems
    if s is not None:
        train = yaml.safe_load((s.target.run_dir / "train.yaml").read_text()) or {}
        if args.data:  # a dataset of the user's own (my/data) on a run that trained on the shipped sets
            train = {**train, "dataset_dir": datadirs.pick([args.data], train.get("dataset_dir"))}
        try:
            registry = eval_plan.registry_for(paths.root(), train) if args.data else {}
            built = eval_plan.build(s.target, train, rows=rows or eval_plan.DEFAULT_ROWS, data=args.data,
                                    registry=registry)
            if not problems:
                return s, built
        except ProblemReport as report:
            problems += report.problems
    raise ProblemReport(problems)


def job(s, built, spec_file: str):
    """The job as a serve plan (reusing chat's runtimes): `python -m rocmft.evaluate.job --spec-file=...`, the
    spec in a private file (serve/private_file.py): in argv, every local user's `ps` would show it."""
    from ..serve.plan import ServePlan

    env = {"PYTHONUNBUFFERED": "1"}
    if s.runtime == "docker":
        env["PYTHONPATH"] = "src"  # the mounted checkout's rocmft, as `make chat PROMPT=` in a container
    # the tuned pass's arguments name every model and adapter the container must see (its mounts)
    return ServePlan("eval", s.runtime, s.arch.name,
                     ("python", "-m", "rocmft.evaluate.job", f"--spec-file={spec_file}"), env,
                     infer_args=built.passes["tuned.loss"], name=s.target.name)


def harness_plan_for(args, env=None):
    """--tasks: every check of the command line, all problems at once; nothing starts. -> (session, HarnessPlan)."""
    import os

    import yaml

    from ..evaluate import harness_plan
    from ..io import paths
    from ..io.problems import Problem, ProblemReport
    from ..serve import session

    problems: list[Problem] = []
    s = None
    for flag in ("data", "rows"):
        if getattr(args, flag):
            problems.append(Problem("", flag.upper() if flag == "data" else "N",
                                    "is for the held-out report; TASKS= runs the harness's tasks",
                                    "drop it, or drop TASKS="))
    try:
        s = session.for_run(args.run, "", args.runtime, args.gpus, env)
    except ProblemReport as report:
        problems += report.problems
    chosen = None
    try:
        chosen = harness_plan.settings(tasks=args.tasks, limit=args.limit, fewshot=args.fewshot, root=paths.root())
    except ProblemReport as report:
        problems += report.problems
    if s is not None and chosen is not None:
        problems += harness_plan.where_problems(s.target, chosen, s.runtime, paths.root(),
                                                os.environ if env is None else env)
    if s is None or chosen is None or problems:
        raise ProblemReport(problems)
    train = yaml.safe_load((s.target.run_dir / "train.yaml").read_text()) or {}
    return s, harness_plan.build(s.target, train, chosen, gpu=bool(s.arch.is_gpu and s.runtime == "docker"))


def harness_job(s, built, spec_file: str):
    from ..serve.plan import ServePlan

    env = {"PYTHONUNBUFFERED": "1"}
    if s.runtime == "docker":
        env["PYTHONPATH"] = "src"
    # the container mounts what these arguments name: the tuned side's model and every adapter of its chain
    mounts = {"model_name_or_path": built.sides["tuned"]["model"]}
    if built.sides["tuned"]["adapters"]:
        mounts["adapter_name_or_path"] = ",".join(built.sides["tuned"]["adapters"])
    return ServePlan("eval", s.runtime, s.arch.name,
                     ("python", "-m", "rocmft.evaluate.harness_job", f"--spec-file={spec_file}"), env,
                     infer_args=mounts, name=s.target.name)


def run(args) -> int:
    import json
    import os

    from ..serve import private_file

    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    # the held-out report, or (--tasks) the harness's benchmarks: each its own plan, job and report
    planned, make_job, report = (harness_plan_for, harness_job, _harness) if args.tasks is not None else \
        (plan_for, job, _evaluate)
    s, built = planned(args)
    if args.print_runtime:
        print(s.runtime)
        return 0
    with private_file.holding(json.dumps(built.spec())) as spec_file:
        return report(s, built, make_job(s, built, str(spec_file)), args.image, verbose)


def _run_job(s, plan, image: str | None, verbose: bool, what: str) -> tuple[int, str, list[str]]:
    """Both reports' way to their job: the session's notes, `what` it compares, then the job where the run
    trained (this venv, or the arch's container). -> (exit code, stdout, the log's tail)."""
    import os
    import sys

    from ..io.problems import raise_if_errors
    from ..serve import local

    messages = list(s.messages)
    if s.runtime == "local":
        messages += raise_if_errors(local.check(plan, s.arch))
    from ..io.safe_text import for_terminal

    for problem in messages:
        print(problem.line(), file=sys.stderr)
    print(for_terminal(f"[rocmft] eval {s.target.name}: {what} ({s.runtime})"), file=sys.stderr, flush=True)
    if s.runtime == "local":
        return _local(plan, s.arch, verbose)
    from ..serve import docker

    client, spec = docker.prepare(plan, s.arch, image_ref=image, gpus=s.gpus, caller_env=os.environ)
    return docker.ask(client, spec, os.environ, verbose=verbose)


def _failed(code: int, tail: list[str]) -> int:
    import sys

    from ..io.safe_text import for_terminal

    for line in tail:  # the job's log: library lines quoting a task's names, a model's strings
        print(for_terminal(line), file=sys.stderr)
    print(f"[rocmft] eval FAILED (exit code {code}): the lines above are the end of its log", file=sys.stderr)
    return code


def _last_json(out: str):
    """The job's last line: its word, checked before anything is written from it."""
    import json

    return json.loads((out.strip().splitlines() or ["null"])[-1])


def _evaluate(s, built, plan, image: str | None, verbose: bool) -> int:
    import sys

    from ..evaluate import report
    from ..io.safe_text import for_terminal

    code, out, tail = _run_job(s, plan, image, verbose,
                               f"base {built.passes['base.loss']['model_name_or_path']} vs {s.target.what}, "
                               f"on {built.data} rows")
    if code != 0:
        return _failed(code, tail)
    try:
        passes = _last_json(out)
        if not isinstance(passes, dict):
            raise TypeError(f"a JSON {type(passes).__name__}, not an object")
        result = report.build(built, passes)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        print(f"[rocmft] eval FAILED: the job's result is not what rocmft.evaluate.job prints ({exc})", file=sys.stderr)
        return 1
    json_path, md_path = report.write(s.target.run_dir, result)
    for line in report.terminal(result):
        print(for_terminal(line))
    print(f"[rocmft] wrote {json_path} and {md_path}")
    return 0


def _harness(s, built, plan, image: str | None, verbose: bool) -> int:
    import sys

    from ..evaluate import harness_report, report
    from ..io.problems import EXIT_INVALID
    from ..io.safe_text import for_terminal, one_line

    code, out, tail = _run_job(s, plan, image, verbose,
                               f"lm-evaluation-harness {built.task_list}, base {built.sides['base']['model']} "
                               f"vs {s.target.what}")
    try:
        answer = _last_json(out)
    except (ValueError, RecursionError):
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("problems"), list):  # the job's refusal, one line each
        for line in answer["problems"]:  # they quote the task files' names: escaped, each on its one line
            print(one_line(f"error: {line}"), file=sys.stderr)
        return EXIT_INVALID
    if code != 0:
        return _failed(code, tail)
    try:
        if not isinstance(answer, dict):
            raise TypeError("not a JSON object")
        section = harness_report.build(built, answer)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        print(f"[rocmft] eval FAILED: the job's result is not what rocmft.evaluate.harness_job prints ({exc})",
              file=sys.stderr)
        return 1
    json_path, md_path = report.write(s.target.run_dir, harness=section)
    for line in harness_report.terminal(section):  # task names come from the task files (issue 43, L6)
        print(for_terminal(line))
    print(f"[rocmft] wrote {json_path} and {md_path}")
    return 0


def _local(plan, arch, verbose: bool):
    import os
    import subprocess

    from ..io import paths
    from ..serve import local

    proc = subprocess.run(local.argv(plan), env=local.environment(plan, arch, os.environ), cwd=paths.root(),
                          stdout=subprocess.PIPE, stderr=None if verbose else subprocess.PIPE, check=False)
    tail = [] if verbose else (proc.stderr or b"").decode("utf-8", "replace").splitlines()[-30:]
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), tail
