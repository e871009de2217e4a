"""`rocmft rehearsal`: CI's rehearsal of the ROCm images (gfx1100, gfx942) on a CPU base (image/rehearsal.py).

    rocmft rehearsal             # fetch what the cpu wheelhouse lacks, then build rocmft-rehearsal:<arch> offline
"""

from __future__ import annotations

NAME = "rehearsal"
HELP = "build the ROCm images' rehearsal on a CPU base (rocmft-rehearsal:<arch>, never usable): CI runs it"


def add_arguments(parser) -> None:
    from ..image.rehearsal import ARCHES

    parser.add_argument("arches", nargs="*", default=list(ARCHES), help=f"arches to rehearse (default: {' '.join(ARCHES)})")


def run(args) -> int:
    from ..hardware.versions import from_lock
    from ..image import docker_api, rehearsal
    from ..image.context import git_commit
    from ..image.wheelhouse import default_folder
    from ..io import paths
    from .image import resolve_arch

    for name in args.arches:
        arch = resolve_arch(name)
        if not arch.is_gpu:
            from ..io.problems import Problem, ProblemReport

            raise ProblemReport([Problem("", "ARCH", f"`{name}` is no ROCm arch: nothing to rehearse",
                                         f"name ROCm arches: {' '.join(rehearsal.ARCHES)}")])
    versions = from_lock()
    wheels = rehearsal.prepare_wheelhouse(versions, default_folder("cpu"), rehearsal.folder())
    client = docker_api.connect()
    timings = rehearsal.run(client, versions, git_commit(paths.root()), wheels, names=args.arches)
    print("==> rehearsal build times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
          + f"; total {sum(timings.values()):.0f} s")
    return 0
