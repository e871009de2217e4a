"""`rocmft wheelhouse ARCH`: download every wheel an offline image build needs into wheelhouse/<arch>/."""

from __future__ import annotations

from pathlib import Path

NAME = "wheelhouse"
HELP = "download every wheel the image of ARCH installs into wheelhouse/<arch>/ (for OFFLINE=1 builds)"


def add_arguments(parser) -> None:
    parser.add_argument("arch", nargs="?", help="an arch of docker/arches.yaml")
    parser.add_argument("--dest", default=None, help="folder (default: wheelhouse/<arch>)")
    parser.add_argument("--flash-attn", choices=["auto", "skip"], default="auto",
                        help="include the flash-attn sdist where the arch has a backend (must match the image build)")
    parser.add_argument("--check", action="store_true", help="only check an existing wheelhouse (names what is missing)")
    parser.add_argument("--dry-run", action="store_true", help="print the pip commands and exit")


def run(args) -> int:
    from ..hardware.versions import from_lock
    from ..image import wheelhouse
    from .image import resolve_arch

    arch = resolve_arch(args.arch)
    plan = wheelhouse.for_arch(arch, from_lock(), Path(args.dest).resolve() if args.dest else None,
                               flash_attn=args.flash_attn)
    make_hint = f"make wheelhouse ARCH={arch.name}"
    if args.dry_run:
        print("\n".join(plan.lines()))
        return 0
    if args.check:
        wheelhouse.check(plan, make_hint=make_hint)
        print(f"{plan.folder}: complete for {arch.name} ({len(plan.required)} direct pins present)")
        return 0
    wheelhouse.check_python(arch)
    return wheelhouse.run(plan, make_hint=make_hint)
