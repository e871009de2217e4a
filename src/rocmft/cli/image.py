"""`rocmft image ARCH`: build the training image for an arch (docker/Dockerfile through the Docker SDK).

    rocmft image gfx942 --dry-run        # the build plan: build args, tags, labels (no Docker needed)
    rocmft image cpu --offline           # no network in the build: installs only from wheelhouse/cpu
"""

from __future__ import annotations

from pathlib import Path

from .. import arches, paths
from ..problems import Problem, ProblemReport, did_you_mean

NAME = "image"
HELP = "build the training image for ARCH (one Dockerfile, build args from docker/arches.yaml); --dry-run prints the plan"


def resolve_arch(name: str | None) -> arches.Arch:
    if not name:
        raise ProblemReport([Problem("", "ARCH", "no arch given",
                                     f"name one: ARCH={' | ARCH='.join(arches.table())}")])
    table = arches.table()
    if name not in table:
        close = did_you_mean(name, table)
        raise ProblemReport([Problem("docker/arches.yaml", "ARCH", f"unknown arch `{name}`",
                                     (close + " " if close else "") + f"known arches: {', '.join(table)}")])
    return table[name]


def add_arguments(parser) -> None:
    parser.add_argument("arch", nargs="?", help="an arch of docker/arches.yaml (gfx942, gfx1100, ..., cpu)")
    parser.add_argument("--offline", action="store_true",
                        help="build with no network at all, installing only from the wheelhouse (make wheelhouse first)")
    parser.add_argument("--wheelhouse", default=None, help="wheelhouse folder (default: wheelhouse/<arch>)")
    parser.add_argument("--flash-attn", choices=["auto", "skip"], default="auto",
                        help="auto: build flash-attn where the arch has a backend (CK or Triton); skip: don't")
    parser.add_argument("--max-jobs", type=int, default=4, help="parallel compile jobs for flash-attn/DeepSpeed ops")
    parser.add_argument("--dry-run", action="store_true", help="print the build plan and exit (no Docker needed)")
    parser.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    parser.add_argument("--verbose", action="store_true", help="echo the whole build output (it always goes to the log)")


def make_plan(args):
    from ..image import plan as image_plan
    from ..image import wheelhouse
    from ..image.context import git_commit
    from ..image.versions import from_lock

    arch = resolve_arch(args.arch)
    root = paths.root()
    versions = from_lock()
    folder = Path(args.wheelhouse).resolve() if args.wheelhouse else wheelhouse.default_folder(arch.name)
    plan = image_plan.build_plan(arch, versions, git_commit(root), offline=args.offline,
                                 wheelhouse=str(folder) if args.offline else "", context=str(root),
                                 flash_attn=args.flash_attn, max_jobs=args.max_jobs)
    return arch, versions, folder, plan


def run(args) -> int:
    from ..image import build, docker_api, wheelhouse

    arch, versions, folder, plan = make_plan(args)
    if args.dry_run:
        print(plan.to_json() if args.json else "\n".join(plan.lines()))
        return 0
    make_hint = f"make wheelhouse ARCH={arch.name}"
    if args.offline:
        wheelhouse.check(wheelhouse.for_arch(arch, versions, folder, flash_attn=args.flash_attn), make_hint=make_hint)
    client = docker_api.connect()
    if not docker_api.require_base(client, plan.base_image, offline=args.offline, arch=arch.name):
        print(f"note: base image {plan.base_image} is not present locally: the daemon will pull it (several GB)")
    print(f"==> building {plan.tags[0]} from {plan.base_image}"
          f" ({'offline: no network, wheels from ' + str(folder) if args.offline else 'online'})", flush=True)
    result = build.run(client, plan, log_path=paths.cache_dir() / f"image-{arch.name}.log",
                       no_cache=args.no_cache, verbose=args.verbose)
    if not result.ok:
        print("\n".join("  | " + line for line in result.tail[-25:]))
        raise build.failure_report(result, plan, make_hint)
    print("\n".join(build.summary_lines(plan, result, client.images.get(result.image_id))))
    return 0
