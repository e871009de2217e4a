"""RUNTIME=slurm's command-line options, checked and turned into SlurmOptions."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ... import __version__
from ...hardware.arches import Arch
from ...io.problems import Problem, raise_if_errors
from .. import names

CONTAINERS = ("apptainer", "docker", "none")
DEFAULT_TIME = "00:30:00"
# Slurm's time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")


def time_seconds(text: str) -> int:
    """A Slurm time limit in seconds: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (sbatch(1), --time)."""
    days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
    parts = [int(x) for x in rest.split(":")]
    if days and "-" in text:
        h, m, sec = (parts + [0, 0])[:3]
    elif len(parts) == 1:
        h, m, sec = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, sec = 0, parts[0], parts[1]
    else:
        h, m, sec = parts
    return ((int(days or 0) * 24 + h) * 60 + m) * 60 + sec


def slurm_time(seconds: float) -> str:
    """Seconds as a Slurm time limit: HH:MM:SS, D-HH:MM:SS from a day on (sbatch(1), --time)."""
    total = int(seconds)
    days, rest = divmod(total, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def warning_seconds(grace_s: int, time_limit: str) -> int:
    """How long before the time limit Slurm warns the job (--signal=B:USR1@N): the recipe's stop grace, but at
    most half the time limit, so a short job is not stopped as soon as it starts (Slurm sends it at once when
    N >= the limit, and up to 60 s early in any case)."""
    return max(1, min(grace_s, time_seconds(time_limit) // 2))


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time: str = DEFAULT_TIME
    container: str = "none"
    sif: str | None = None  # apptainer image file (CONTAINER=apptainer)
    image: str | None = None  # docker image (CONTAINER=docker)
    sbatch_args: tuple[str, ...] = ()  # extra #SBATCH lines, e.g. --qos=high --constraint=mi300x


def _add_once(parser, *names: str, **kwargs) -> None:
    """slurm and k8s.py share a few options; every runtime's options land on the same parser."""
    if any(name in parser._option_string_actions for name in names):  # argparse has no public lookup
        return
    parser.add_argument(*names, **kwargs)


def add_shared_arguments(parser) -> None:
    _add_once(parser, "--no-submit", dest="submit", action="store_false", default=True,
              help="slurm/k8s: only render the sbatch script / PyTorchJob into the run dir (SUBMIT=0)")
    _add_once(parser, "--container-image", dest="container_image", default=None,
              help="slurm (CONTAINER=docker) / k8s: the image to run (default: rocmft:<version>-<arch>)")
    _add_once(parser, "--time", dest="time_limit", default=None,
              help=f"slurm: job time limit (Slurm format, default {DEFAULT_TIME}); k8s: activeDeadlineSeconds")


def add_arguments(parser) -> None:
    add_shared_arguments(parser)
    _add_once(parser, "--partition", default=None, help="slurm: partition (PARTITION=)")
    _add_once(parser, "--account", default=None, help="slurm: account to charge (ACCOUNT=)")
    _add_once(parser, "--container", default=None,
              help="slurm: apptainer | docker | none (default: apptainer for GPU arches, none for cpu)")
    _add_once(parser, "--sif", default=None, help="slurm: the Apptainer image (default: rocmft-<arch>.sif in the project root)")
    _add_once(parser, "--sbatch-args", dest="sbatch_args", default="",
              help='slurm: extra sbatch options, one string (SBATCH_ARGS="--qos=high --constraint=mi300x")')
    _add_once(parser, "--wait", action="store_true",
              help="slurm: wait for the job (sbatch --wait), stream train.log, return its exit code (WAIT=1)")


def default_container(arch: Arch) -> str:
    # AMD HPC centres run containers through Apptainer; the CPU arch is for tests on bare metal.
    return "apptainer" if arch.is_gpu else "none"


def default_sif(arch: str, root: Path) -> str:
    return str(root / f"rocmft-{arch}.sif")


def default_image(arch: str) -> str:
    try:
        from ...image.plan import tags

        return tags(arch)[0]
    except ImportError:  # the image package is optional for rendering
        return f"rocmft:{__version__}-{arch}"


def option_problems(args) -> list[Problem]:
    """The options as text, before anything else runs: each ends up in the sbatch script."""
    problems: list[Problem] = []
    container = (getattr(args, "container", None) or "none").strip().lower()
    if container not in CONTAINERS:
        problems.append(Problem("", "CONTAINER", f"unknown container mode `{container}`", f"one of: {', '.join(CONTAINERS)}"))
    time_limit = str(getattr(args, "time_limit", None) or DEFAULT_TIME).strip()
    if not _TIME.match(time_limit):
        problems.append(Problem("", "TIME", f"`{time_limit}` is not a Slurm time limit",
                                "e.g. TIME=00:30:00 (hours:minutes:seconds), TIME=90 (minutes) or TIME=1-00:00:00 (days-hours); "
                                "every job gets one, so a mistake cannot hang the queue"))
    sbatch_args = getattr(args, "sbatch_args", "") or ""
    extra: list[str] = []
    if names.has_control(sbatch_args):
        problems += names.check("SBATCH_ARGS", sbatch_args)
    else:
        try:
            extra = shlex.split(sbatch_args)
        except ValueError as exc:
            problems.append(Problem("", "SBATCH_ARGS", f"cannot split: {exc}"))
    for item in extra:
        if not item.startswith("-"):
            problems.append(Problem("", "SBATCH_ARGS", f"`{item}` is not an sbatch option", "e.g. --qos=high (one string, options only)"))
    for key, attr in (("PARTITION", "partition"), ("ACCOUNT", "account")):
        problems += names.check(key, getattr(args, attr, None), names.SLURM_NAME, "a Slurm name (letters, digits, _.+-)")
    problems += names.check("SIF", getattr(args, "sif", None))
    problems += names.check("CONTAINER_IMAGE", getattr(args, "container_image", None), names.IMAGE_REF, "an image reference")
    return problems


def options_from_args(args, arch: Arch, root: Path) -> SlurmOptions:
    raise_if_errors(option_problems(args))
    container = (getattr(args, "container", None) or default_container(arch)).strip().lower()
    return SlurmOptions(
        partition=getattr(args, "partition", None) or None,
        account=getattr(args, "account", None) or None,
        time=str(getattr(args, "time_limit", None) or DEFAULT_TIME).strip(),
        container=container,
        sif=getattr(args, "sif", None) or (default_sif(arch.name, root) if container == "apptainer" else None),
        image=getattr(args, "container_image", None) or (default_image(arch.name) if container == "docker" else None),
        sbatch_args=tuple(shlex.split(getattr(args, "sbatch_args", "") or "")),
    )
