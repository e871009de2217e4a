"""`rocmft sif --arch gfx942`: the rocmft Docker image of an arch as an Apptainer image (rocmft-<arch>.sif).

AMD HPC centres run containers through Apptainer (`apptainer exec --rocm`), which runs a .sif file, not a
Docker image. The conversion reads the image from the local Docker daemon, so it runs where both apptainer
and the image (`make image ARCH=...`) are; then put the .sif on the cluster's shared filesystem (the
default path is the project root, which every node sees) and train with CONTAINER=apptainer.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from ..hardware import arches
from ..io import paths
from ..io.problems import Problem, ProblemReport

HELP = "convert the rocmft Docker image of an arch to an Apptainer image (apptainer build; for CONTAINER=apptainer on Slurm)"
TOOLS = ("apptainer", "singularity")  # SingularityCE takes the same build command


def add_arguments(parser) -> None:
    parser.add_argument("--arch", default=None, help="the arch whose image to convert (ARCH=)")
    parser.add_argument("--out", default=None, help="the .sif to write (default: rocmft-<arch>.sif in the project root)")
    parser.add_argument("--image", default=None, help="the Docker image (default: rocmft:<arch>)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing .sif")
    parser.add_argument("--dry-run", action="store_true", help="print the command, run nothing")


def image_for(arch: str) -> str:
    try:
        from ..image.plan import tags

        return tags(arch)[1]  # the moving rocmft:<arch> tag that `make image` sets
    except ImportError:
        return f"rocmft:{arch}"


def command(tool: str, image: str, out: Path, force: bool = False) -> list[str]:
    """`apptainer build [--force] OUT docker-daemon://IMAGE`: read from the local Docker daemon, never a registry."""
    return [tool, "build", *(["--force"] if force else []), str(out), f"docker-daemon://{image}"]


def run(args) -> int:
    if not args.arch:
        raise ProblemReport([Problem("", "ARCH", "which arch's image? e.g. make sif ARCH=gfx942",
                                     f"known arches: {', '.join(arches.table())}")])
    arch = arches.get(args.arch, key="ARCH")
    image = args.image or image_for(arch.name)
    out = Path(args.out) if args.out else paths.root() / f"rocmft-{arch.name}.sif"
    tool = next((t for t in TOOLS if shutil.which(t)), None)
    cmd = command(tool or "apptainer", image, out, args.force)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    if tool is None:
        raise ProblemReport([Problem("", "make sif", "apptainer is not installed on this machine",
                                     "run `make sif` where apptainer and the Docker image both are; or move the image: "
                                     f"`docker save {image} -o rocmft.tar` here, copy it, and `apptainer build {out.name} "
                                     "docker-archive://rocmft.tar` where apptainer is (install: "
                                     "https://apptainer.org/docs/admin/main/installation.html)")])
    if out.exists() and not args.force:
        raise ProblemReport([Problem("", "make sif", f"{out} exists", "remove it, or add --force to rebuild it")])
    print(f"[rocmft] {shlex.join(cmd)}", flush=True)
    code = subprocess.call(cmd)
    if code == 0:
        print(f"[rocmft] wrote {out}: train with CONTAINER=apptainer{'' if not args.out else f' SIF={out}'}", flush=True)
    else:
        print(f"[rocmft] apptainer build failed (exit code {code}); is {image} in the local Docker daemon "
              f"(`docker image ls {image.split(':')[0]}`, `make image ARCH={arch.name}`)?", flush=True)
    return code
