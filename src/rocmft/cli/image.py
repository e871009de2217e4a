"""`rocmft image ARCH`: build the training image for an arch (docker/Dockerfile through the Docker SDK).

    rocmft image gfx942 --dry-run        # the build plan: build args, tags, labels (no Docker needed)
    rocmft image cpu --offline           # no network in the build: installs only from wheelhouse/cpu
"""

from __future__ import annotations

from pathlib import Path

from ..hardware import arches
from ..io import paths
from ..io.problems import Problem, ProblemReport, did_you_mean, raise_if_errors

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
    parser.add_argument("--max-jobs", type=int, default=None,
                        help="parallel compile jobs for flash-attn (default: flash-attn's rule, one per 9 GiB "
                             "of free RAM, at most half the CPUs)")
    parser.add_argument("--head-dims", default="",
                        help="flash-attn CK head dims to compile: comma list of 32,64,128,256, or `all` "
                             "(default: those of the planner's model table)")
    parser.add_argument("--dry-run", action="store_true", help="print the build plan and exit (no Docker needed)")
    parser.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    parser.add_argument("--verbose", action="store_true", help="echo the whole build output (it always goes to the log)")


def make_plan(args, base_id: str = ""):
    from ..hardware.versions import from_lock
    from ..image import kernels, wheelhouse
    from ..image import plan as image_plan
    from ..image.context import git_commit

    arch = resolve_arch(args.arch)
    root = paths.root()
    versions = from_lock()
    folder = Path(args.wheelhouse).resolve() if args.wheelhouse else wheelhouse.default_folder(arch.name)
    jobs = kernels.max_jobs(*kernels.host_resources(), override=args.max_jobs)
    try:
        plan = image_plan.build_plan(arch, versions, git_commit(root), offline=args.offline,
                                     wheelhouse=str(folder) if args.offline else "", context=str(root),
                                     flash_attn=args.flash_attn, max_jobs=jobs, head_dims=args.head_dims,
                                     base_id=base_id, kernel_cache_root=str(folder),
                                     kernel_sources=wheelhouse.kernel_sources(folder, versions) if args.offline else ())
    except ValueError as exc:
        raise ProblemReport([Problem("", "HEAD_DIMS", str(exc), "HEAD_DIMS=64,128 or HEAD_DIMS=all")]) from None
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
    raise_if_errors(docker_api.base_digest_problems(client, plan.base_image, arch.base_image_digest, arch=arch.name))
    if not docker_api.require_base(client, plan.base_image, offline=args.offline, arch=arch.name):
        print(f"note: base image {plan.base_image} is not present locally: the daemon will pull it (several GB)")
    else:
        # The kernel cache key holds the base image's id, not its tag: a re-pushed tag gets new kernels.
        arch, versions, folder, plan = make_plan(args, base_id=docker_api.get_image(client, plan.base_image).id)
    print(f"==> building {plan.tags[0]} from {plan.base_image}"
          f" ({'offline: no network, wheels from ' + str(folder) if args.offline else 'online'})", flush=True)
    print("==> estimate: " + plan.estimate(), flush=True)
    result = build.run(client, plan, log_path=paths.cache_dir() / f"image-{arch.name}.log",
                       no_cache=args.no_cache, verbose=args.verbose)
    if not result.ok:
        print("\n".join(build.failed_step_lines(result)))
        raise build.failure_report(result, plan, make_hint)
    record, kept = build.keep_kernel_wheel(client, plan, result)
    print(build.kernel_line(record, kept, result.stage("kernels")))
    print("\n".join(build.summary_lines(plan, result, client.images.get(result.image_id))))
    return 0
