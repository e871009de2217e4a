"""`rocmft doctor`: check this host for the GPU container path and print a fix for each failure."""

from __future__ import annotations

import json
from dataclasses import asdict

HELP = "check the host: GPU devices and groups, GPUs and their arch, Docker, the image, disk, shm, IOMMU"


def add_arguments(parser) -> None:
    parser.add_argument("--arch", default=None, help="the arch you mean to run (default: the GPUs' own)")
    parser.add_argument("--json", action="store_true", help="print the facts and findings as JSON")


def run(args) -> int:
    from .. import doctor
    from ..hardware import arches, host

    table = arches.table()
    if args.arch:
        arches.get(args.arch, key="ARCH")
    facts = host.gather()
    wanted = [args.arch] if args.arch else [*facts.gpu_arches, "cpu"]
    docker_facts = doctor.docker_facts([a for a in wanted if a in table])
    report = doctor.check(facts, docker_facts, table, arch=args.arch)
    if args.json:
        data = {"host": facts.to_dict(), "docker": asdict(docker_facts), **report.to_dict()}
        print(json.dumps(data, indent=2, default=str))
    else:
        print("\n".join(doctor.render(report)))
    return 1 if report.failed else 0
