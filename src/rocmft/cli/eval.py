"""`rocmft eval RUN [--data NAME] [--rows N]`: did training help? The run against its base model on held-out
rows, by LLaMA-Factory's own eval and predict (rocmft.evaluate), where the run trained (this venv or the
arch's container, as `make chat`). Writes eval.json and eval.md into the run dir."""

from __future__ import annotations

from .common import add_where_arguments

HELP = "compare a run with its base model on held-out rows: eval loss, perplexity, BLEU-4/ROUGE, example answers"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last` (the newest run)")
    parser.add_argument("--data", default=None,
                        help="a registered dataset to evaluate on (default: the rows the run held out, val_size)")
    parser.add_argument("--rows", default=None, help="generate answers for at most this many rows (default 50)")
    add_where_arguments(parser, "where the run trained", "show LLaMA-Factory's log")


def plan_for(args, env=None):
    """Every check of the command line, all problems at once; nothing starts. -> (session, EvalPlan)."""
    import yaml

    from .. import paths
    from ..evaluate import plan as eval_plan
    from ..problems import Problem, ProblemReport
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


def run(args) -> int:
    import json
    import os

    from ..serve import private_file

    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    s, built = plan_for(args)
    if args.print_runtime:
        print(s.runtime)
        return 0
    with private_file.holding(json.dumps(built.spec())) as spec_file:
        return _evaluate(s, built, job(s, built, str(spec_file)), args.image, verbose)


def _evaluate(s, built, plan, image: str | None, verbose: bool) -> int:
    import json
    import os
    import sys

    from ..evaluate import report
    from ..problems import raise_if_errors
    from ..serve import local

    messages = list(s.messages)
    if s.runtime == "local":
        messages += raise_if_errors(local.check(plan, s.arch))
    for problem in messages:
        print(problem.line(), file=sys.stderr)
    print(f"[rocmft] eval {s.target.name}: base {built.passes['base.loss']['model_name_or_path']} vs "
          f"{s.target.what}, on {built.data} rows ({s.runtime})", file=sys.stderr, flush=True)
    if s.runtime == "local":
        code, out, tail = _local(plan, s.arch, verbose)
    else:
        from ..serve import docker

        client, spec = docker.prepare(plan, s.arch, image_ref=image, gpus=s.gpus, caller_env=os.environ)
        code, out, tail = docker.ask(client, spec, os.environ, verbose=verbose)
    if code != 0:
        for line in tail:
            print(line, file=sys.stderr)
        print(f"[rocmft] eval FAILED (exit code {code}): the lines above are the end of its log", file=sys.stderr)
        return code
    try:  # the job's last line: its word, checked before anything is written from it
        passes = json.loads((out.strip().splitlines() or ["null"])[-1])
        if not isinstance(passes, dict):
            raise TypeError(f"a JSON {type(passes).__name__}, not an object")
        result = report.build(built, passes)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        print(f"[rocmft] eval FAILED: the job's result is not what rocmft.evaluate.job prints ({exc})", file=sys.stderr)
        return 1
    json_path, md_path = report.write(s.target.run_dir, result)
    for line in report.terminal(result):
        print(line)
    print(f"[rocmft] wrote {json_path} and {md_path}")
    return 0


def _local(plan, arch, verbose: bool):
    import os
    import subprocess

    from .. import paths
    from ..serve import local

    proc = subprocess.run(local.argv(plan), env=local.environment(plan, arch, os.environ), cwd=paths.root(),
                          stdout=subprocess.PIPE, stderr=None if verbose else subprocess.PIPE, check=False)
    tail = [] if verbose else (proc.stderr or b"").decode("utf-8", "replace").splitlines()[-30:]
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), tail
