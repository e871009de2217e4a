"""`rocmft serve RUN`: LLaMA-Factory's OpenAI-compatible API for a run (its API app, serve/api.py), on
127.0.0.1 by default, in the run's runtime, behind ROCMFT_API_KEY (or a key generated and printed once);
Ctrl-C/SIGTERM stops it (and removes its container)."""

from __future__ import annotations

from .common import add_listen_arguments, add_where_arguments

HELP = ("serve a run over LLaMA-Factory's OpenAI-compatible API (127.0.0.1:8000; always behind a key: "
        "ROCMFT_API_KEY or one generated)")


def add_arguments(parser) -> None:
    parser.add_argument("run", nargs="?", default="last", help="run dir or name, or `last` (the newest run)")
    from ..serve.plan import API_PORT

    add_listen_arguments(parser, API_PORT)
    parser.add_argument("--set", dest="set_string", default="",
                        help='default generation settings, e.g. "max_new_tokens=128 temperature=0.2"')
    add_where_arguments(parser, "where the run trained", "show the model's loading log too")


def run(args) -> int:
    import os

    from ..io.problems import ProblemReport, raise_if_errors
    from ..serve import plan, ports, session

    host = (args.host or "127.0.0.1").strip()
    port, problems = plan.parse_port(args.port, plan.API_PORT)
    # LLaMA-Factory's API allows every CORS origin: without a key, any web page open in this user's browser
    # could use the model. No ROCMFT_API_KEY exported: one for this server, printed once, passed by name.
    env, generated, key_problems = plan.api_key_env(os.environ)
    problems += key_problems
    try:
        s = session.for_run(args.run, args.set_string, args.runtime, args.gpus)
        if args.print_runtime:
            print(s.runtime)
            return 0
    except ProblemReport as report:
        raise ProblemReport([*report.problems, *problems]) from None
    notes = raise_if_errors(problems)
    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    api = plan.api(s.target, s.settings, s.runtime, host, port, verbose=verbose)
    busy = ports.port_problem(host, port)
    messages = [*s.messages, *notes, *raise_if_errors([busy] if busy else [])]
    messages += plan.exposure(api)

    def ready_lines() -> list[str]:
        key = (f"API key (generated for this server; export {plan.KEY_ENV} to choose one): "
               f"export {plan.KEY_ENV}={generated}" if generated else f"API key: your {plan.KEY_ENV}")
        return [f"serving {s.target.name} as model `{api.name}`: {s.target.what}, template {s.target.template}",
                f"OpenAI base URL: {api.url}", key, f"try: {plan.curl_line(api)}", "Ctrl-C stops it"]

    return start(api, s.arch, s.gpus, args, messages, ready_lines, env,
                 loading=f"loading {s.target.what} ({s.runtime}) ...",
                 probe=lambda url: ports.proves_ready(url, env[plan.READY_ENV], api.name))


def start(srv, arch, gpus, args, messages, ready_lines, env, loading: str, probe=None) -> int:
    """Shared by serve and webui: checks, then the server in the foreground. `env` is the caller's
    environment plus a generated secret (API_KEY, WEBUI_PASSWORD) the server reads by name."""
    import os
    import sys

    from ..io.problems import raise_if_errors
    from ..serve import foreground, local

    verbose = args.verbose or os.environ.get("VERBOSE", "") in ("1", "yes", "true")
    if srv.runtime == "local":
        messages = [*messages, *raise_if_errors(local.check(srv, arch))]
        for problem in messages:
            print(problem.line(), file=sys.stderr)
        log = local.log_path(srv)
        print(f"[rocmft] {loading} (log: {log})", flush=True)
        handle = local.Process(local.argv(srv), local.environment(srv, arch, env))
        return foreground.serve(srv, handle, log, ready_lines=ready_lines, verbose=verbose,
                                **({"probe": probe} if probe else {}))

    from ..serve import docker

    client, spec = docker.prepare(srv, arch, image_ref=args.image, gpus=gpus, caller_env=env)
    for problem in messages:
        print(problem.line(), file=sys.stderr)
    log = local.log_path(srv)
    print(f"[rocmft] {loading} in container {spec.name} from {spec.image} (log: {log})", flush=True)
    handle = docker.Container(client, spec, env)
    return foreground.serve(srv, handle, log, ready_lines=ready_lines, verbose=verbose,
                            **({"probe": probe} if probe else {}))
