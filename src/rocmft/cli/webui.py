"""`rocmft webui`: LLaMA-Factory's LlamaBoard for interactive experiments, on 127.0.0.1 by default: in the
arch's container with its devices and the project, data and HF cache mounted, or in this venv for cpu."""

from __future__ import annotations

HELP = "LLaMA-Factory's LlamaBoard web UI (127.0.0.1:7860) in the arch's container, or local for cpu"


def add_arguments(parser) -> None:
    parser.add_argument("--arch", default=None, help="the image's arch (default: this host's GPUs, else cpu)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", default=None, help="TCP port (default 7860)")
    parser.add_argument("--runtime", default=None, help="local | docker (default: docker for GPU arches, local for cpu)")
    parser.add_argument("--gpus", default=None, help="RUNTIME=docker: only these GPUs, e.g. 0,1 (default: all)")
    parser.add_argument("--image", default=None, help="RUNTIME=docker: a local image instead of rocmft:<arch>")
    parser.add_argument("--print-runtime", action="store_true",
                        help="print where this would run (local | docker) and exit (make installs the CPU stack for local)")
    parser.add_argument("--verbose", action="store_true", help="show Gradio's start-up log too")


def run(args) -> int:
    from ..problems import ProblemReport, raise_if_errors
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
    messages = raise_if_errors([busy] if busy else []) + plan.exposure(ui, {})

    def ready_lines() -> list[str]:
        return [f"LlamaBoard: {ui.url}  ({arch.name}, {runtime})",
                "for interactive experiments; recipes stay the source of truth for runs (`make train`)",
                "Ctrl-C stops it"]

    return start(ui, arch, gpus, args, messages, ready_lines, loading="starting LlamaBoard")
