"""`rocmft chat RUN [--prompt TEXT]`: talk to a run (its model + adapter or merged export, its template),
where it trained: this venv or the arch's container. With --prompt: one answer on stdout, then exit."""

from __future__ import annotations

from .common import add_where_arguments

HELP = "chat with a run: its base model + adapter (or merged export) and its template (--prompt for one answer)"


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last` (the newest run)")
    parser.add_argument("--prompt", default=None, help="answer this one prompt on stdout and exit")
    parser.add_argument("--base-too", action="store_true",
                        help="with --prompt: the base model's answer and the run's, one line each (one model load)")
    parser.add_argument("--set", dest="set_string", default="",
                        help='generation settings, e.g. "max_new_tokens=128 temperature=0.2"')
    add_where_arguments(parser, "where the run trained", "show the model's loading log")


def run(args) -> int:
    import os
    import sys

    from ..problems import raise_if_errors
    from ..serve import local, plan, session

    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    s = session.for_run(args.run, args.set_string, args.runtime, args.gpus)
    if args.print_runtime:
        print(s.runtime)
        return 0
    base_too = bool(args.base_too and args.prompt is not None)
    chat = plan.chat(s.target, s.settings, s.runtime, prompt=args.prompt, base_too=base_too)
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
            return _side_by_side(code, answer, tail, args.prompt)
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
        return _side_by_side(code, answer, tail, args.prompt)
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
