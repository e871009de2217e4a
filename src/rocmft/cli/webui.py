"""`rocmft webui`: LLaMA-Factory's LlamaBoard for interactive experiments, on 127.0.0.1 by default: in the
arch's container with its devices and the project, data and HF cache mounted, or in this venv for cpu."""

from __future__ import annotations

from .common import add_listen_arguments, add_where_arguments

HELP = "LLaMA-Factory's LlamaBoard web UI (127.0.0.1:7860) in the arch's container, or local for cpu"


def add_arguments(parser) -> None:
    parser.add_argument("--arch", default=None, help="the image's arch (default: this host's GPUs, else cpu)")
    from ..serve.plan import WEBUI_PORT

    add_listen_arguments(parser, WEBUI_PORT)
    add_where_arguments(parser, "docker for GPU arches, local for cpu", "show Gradio's start-up log too")


def run(args) -> int:
    import os

    from ..io.problems import ProblemReport, raise_if_errors
    from ..serve import plan, ports, session
    from .serve import start

    host = (args.host or "127.0.0.1").strip()
    port, problems = plan.parse_port(args.port, plan.WEBUI_PORT)
    try:
        arch, runtime, gpus = session.for_arch(args.arch, args.runtime, args.gpus)
        if args.print_runtime:
            print(runtime)
            return 0
    except ProblemReport as report:
        raise ProblemReport([*report.problems, *problems]) from None
    raise_if_errors(problems)
    ui = plan.webui(arch.name, runtime, host, port)
    busy = ports.port_problem(host, port)
    # no credential of yours reaches LlamaBoard (whoever logs in runs code as you); its own password always
    env, generated, refused = plan.webui_environment(os.environ)
    messages = raise_if_errors([*([busy] if busy else []), *refused]) + plan.exposure(ui)

    def ready_lines() -> list[str]:
        password = (f"{generated} (generated; export {plan.PASSWORD_ENV} to choose one)" if generated
                    else f"your {plan.PASSWORD_ENV}")
        return [f"LlamaBoard: {ui.url}  ({arch.name}, {runtime})",
                f"log in as {plan.WEBUI_USER}, password {password}",
                "whoever logs in runs code as you (model code, training commands): keep the password to yourself",
                "for interactive experiments; recipes stay the source of truth for runs (`make train`)",
                "Ctrl-C stops it"]

    return start(ui, arch, gpus, args, messages, ready_lines, env, loading="starting LlamaBoard")
