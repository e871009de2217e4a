"""`rocmft shell`: an interactive shell in the arch's image, with the devices, groups and mounts of a run."""

from __future__ import annotations

import argparse

HELP = "open a shell in the image of ARCH with the same devices, groups and mounts as a training run"


def add_arguments(parser) -> None:
    parser.add_argument("--arch", default=None, help="the image's arch (default: this host's GPUs, else cpu)")
    parser.add_argument("--gpus", default=None, help="only these GPUs, e.g. 0,1 (default: all)")
    parser.add_argument("--image", default=None, help="a local image instead of rocmft:<arch> (its arch label must match)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- command",
                        help="run this instead of bash (after --)")


def run(args) -> int:
    import os
    import shutil
    import subprocess
    import sys

    from ..hardware import arches, host
    from ..io.problems import Problem, ProblemReport, raise_if_errors
    from ..launch import docker as rt
    from ..launch import plan as launch_plan
    from ..launch.plan import devices_from_env, parse_gpus

    facts = host.gather()
    detected = next((a for a in facts.gpu_arches if a in arches.table()), None)
    arch = arches.get(args.arch or detected or "cpu", key="ARCH")
    gpus = parse_gpus(args.gpus) or (devices_from_env(os.environ) if arch.is_gpu else None)
    plan = launch_plan.shell(arch, os.environ, gpus)
    raise_if_errors(rt.check_host(plan, arch, facts))
    cli = shutil.which("docker")
    if not cli:
        raise ProblemReport([Problem("", "docker", "`make shell` needs the docker command-line client (an interactive TTY)",
                                     "install it: `sudo apt-get install docker.io` (or docker-ce-cli)")])
    client = rt.connect(timeout=30)
    tag, _image = rt.resolve_image(client, arch, args.image)
    command = tuple(a for a in args.cmd if a != "--") or ("bash",)
    spec = rt.container_spec(plan, arch, facts, image=tag, command=command, interactive=True,
                             name=f"rocmft-shell-{facts.user}-{os.getpid()}")
    raise_if_errors(rt.check_mounts(spec))
    raise_if_errors(rt.create_cache_dirs(spec))
    argv = rt.docker_run_argv(spec, tty=sys.stdin.isatty() and sys.stdout.isatty())
    argv[0] = cli
    print(f"[rocmft] {tag} as {spec.user} in {spec.working_dir}; devices: {' '.join(spec.devices) or 'none'}",
          file=sys.stderr, flush=True)
    return subprocess.call(argv)  # secrets go by name (-e HF_TOKEN): the docker client reads them from here
