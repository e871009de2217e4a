"""`rocmft chat RUN [--prompt-file FILE|- | --prompt TEXT]`: talk to a run (its model + adapter or merged
export, its template), where it trained: this venv or the arch's container. With a prompt: one answer on
stdout, then exit.

A prompt given as an argument is in every local user's `ps` while the model loads and answers; `make chat
PROMPT=` hands it over on stdin (`--prompt-file=-`), and the job gets it in a private file
(serve/private_file.py), never in argv."""

from __future__ import annotations

from .common import add_where_arguments

HELP = "chat with a run: its base model + adapter (or merged export) and its template (--prompt for one answer)"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last` (the newest run)")
    parser.add_argument("--prompt-file", default=None,
                        help="answer the prompt in this file (`-`: stdin) on stdout and exit (private, unlike --prompt)")
    parser.add_argument("--prompt", default=None,
                        help="answer this one prompt on stdout and exit (other users see it in `ps`: --prompt-file)")
    parser.add_argument("--base-too", action="store_true",
                        help="with --prompt: the base model's answer and the run's, one line each (one model load)")
    parser.add_argument("--set", dest="set_string", default="",
                        help='generation settings, e.g. "max_new_tokens=128 temperature=0.2"')
    add_where_arguments(parser, "where the run trained", "show the model's loading log")


def prompt_of(args) -> str | None:
    """The one prompt to answer (None: the interactive chat), or one line why it cannot be read."""
    import sys

    from ..io.problems import Problem, ProblemReport

    if args.prompt_file is None:
        return args.prompt
    if args.prompt is not None:
        raise ProblemReport([Problem("", "PROMPT", "a prompt given twice (PROMPT= and PROMPT_FILE=)", "give one")])
    try:
        if args.prompt_file == "-":
            return sys.stdin.buffer.read().decode("utf-8")  # byte for byte: no newline translation
        with open(args.prompt_file, "rb") as fh:
            return fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemReport([Problem("", "PROMPT_FILE", f"cannot read `{args.prompt_file}`: "
                                     f"{getattr(exc, 'strerror', None) or exc}")]) from None


def run(args) -> int:
    from contextlib import nullcontext

    from ..io.problems import ProblemReport
    from ..serve import private_file, session

    problems, prompt, s = [], None, None
    try:
        prompt = prompt_of(args)
    except ProblemReport as report:
        problems += report.problems
    try:
        s = session.for_run(args.run, args.set_string, args.runtime, args.gpus)
    except ProblemReport as report:
        problems += report.problems
    if problems or s is None:
        raise ProblemReport(problems)
    if args.print_runtime:
        print(s.runtime)
        return 0
    with private_file.holding(prompt) if prompt is not None else nullcontext() as prompt_file:
        return _talk(args, s, prompt, None if prompt_file is None else str(prompt_file))


def _talk(args, s, prompt: str | None, prompt_file: str | None) -> int:
    import os
    import sys

    from ..io.problems import raise_if_errors
    from ..serve import local, plan

    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    base_too = bool(args.base_too and prompt is not None)
    chat = plan.chat(s.target, s.settings, s.runtime, prompt_file=prompt_file, base_too=base_too, verbose=verbose)
    messages = list(s.messages)
    if s.runtime == "local":
        messages += raise_if_errors(local.check(chat, s.arch))
    what = f"[rocmft] {s.target.name}: {s.target.what}, template {s.target.template}"

    if s.runtime == "local":
        _say(messages)
        print(f"{what} (local)", file=sys.stderr, flush=True)
        if chat.kind == "chat":
            return local.chat(chat, s.arch, os.environ)
        if base_too:
            code, answer, tail = local.ask_captured(chat, s.arch, os.environ)
            return _side_by_side(code, answer, tail, prompt)
        code, tail = local.ask(chat, s.arch, os.environ, verbose=verbose)
        return _ended(code, tail)

    from ..serve import docker

    client, spec = docker.prepare(chat, s.arch, image_ref=args.image, gpus=s.gpus, caller_env=os.environ)
    _say(messages)
    print(f"{what} (in container {spec.name} from {spec.image})", file=sys.stderr, flush=True)
    if chat.kind == "chat":
        return docker.chat(spec)
    code, answer, tail = docker.ask(client, spec, os.environ, verbose=verbose)
    if base_too:
        return _side_by_side(code, answer, tail, prompt)
    sys.stdout.write(answer)
    sys.stdout.flush()
    return _ended(code, tail)


SHOWN_CHARS = 72


def _one_line(text: str) -> str:
    """An answer on one line: an untrained model's can hold newlines and run long."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else flat[:SHOWN_CHARS - 3] + "..."


def _side_by_side(code: int, stdout: str, tail: list[str], prompt: str) -> int:
    import json

    if code != 0:
        return _ended(code, tail)
    try:
        answers = json.loads(stdout.strip().splitlines()[-1])
        base, tuned = answers["base"], answers["tuned"]
    except (IndexError, ValueError, KeyError, TypeError):
        return _ended(1, [*tail, *stdout.splitlines()[-5:]])
    print(f"[rocmft] asked: {prompt}")
    print(f"  base model : {_one_line(base)}")
    print(f"  trained    : {_one_line(tuned)}", flush=True)
    return 0


def _say(messages) -> None:
    import sys

    for problem in messages:
        print(problem.line(), file=sys.stderr)


def _ended(code: int, tail: list[str]) -> int:
    import sys

    if code != 0:
        for line in tail:
            print(line, file=sys.stderr)
        print(f"[rocmft] chat FAILED (exit code {code}): the lines above are the end of its log", file=sys.stderr)
    return code
