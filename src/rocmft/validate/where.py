"""Where LLaMA-Factory's and DeepSpeed's checks run: next to the job's own copy of them.

A job on RUNTIME=docker runs the LLaMA-Factory, DeepSpeed and transformers of the arch's image; judging its
files with other versions on the host would pass what the job refuses (or the reverse), and would need
the whole CPU training stack on a host that only drives containers. So:

  local            this venv (the job runs here)
  docker           a short-lived container of the image the job will run (no devices, no network)
  slurm            container=none: this venv (the job runs it); apptainer: the SIF, when apptainer and the
                   SIF are on this host; docker: the image, when this host's daemon has it
  k8s              the image, when this host's daemon has it (the cluster pulls it from a registry)
  render/validate  this venv when it has the stack, else the arch's image when the daemon has it

When none of those is at hand the checks are reported as not run, with why (a warning, never silence);
the job then meets LLaMA-Factory's own checks when it starts. The inputs on disk (model, datasets) are
checked on the host in every case: they are plain file checks.

Functions that decide are pure (`container_request`, `apptainer_argv`); `run` does the I/O.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..io.problems import Problem, ProblemReport
from . import request as req

ENTRY = ("python", "-m", "rocmft.validate.request")
NOT_RUN = "LLaMA-Factory's and DeepSpeed's checks did not run"
TIMEOUT_S = 300  # importing LLaMA-Factory in a cold container takes ~10-30 s; a hang must not block a launch


@dataclass(frozen=True)
class Place:
    kind: str  # "venv" | "docker" | "apptainer" | "none"
    label: str  # for messages: where the checks ran
    stack: str | None = None  # what judged the files, for the cache; None = this venv's package versions
    ref: str = ""  # the docker image id, or the SIF path
    reason: str = ""  # kind == "none": why the checks could not run here


def venv_has_stack() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("llamafactory", "deepspeed"))


def in_venv() -> Place:
    return Place("venv", "this venv")


def in_image(tag: str, image_id: str) -> Place:
    return Place("docker", f"image {tag} ({image_id.split(':')[-1][:12]})", stack=f"image={image_id}", ref=image_id)


def in_sif(path: str) -> Place:
    stat = os.stat(path)
    return Place("apptainer", f"Apptainer image {path}", stack=f"sif={os.path.abspath(path)}:{stat.st_size}:{stat.st_mtime_ns}",
                 ref=path)


def nowhere(reason: str) -> Place:
    return Place("none", "nowhere", reason=reason)


# ---- choosing

def _local_image(arch, ref: str | None = None) -> tuple[Place | None, str]:
    """The arch's image on this host's daemon, or (None, why not). Never raises: callers decide."""
    from ..image import docker_api

    if not docker_api.daemon_configured():
        return None, "no Docker daemon configured on this host"
    try:
        from ..launch.docker.daemon import resolve_image

        tag, image = resolve_image(docker_api.connect(timeout=30), arch, ref)
    except ProblemReport as report:
        return None, report.problems[0].message
    return in_image(tag, image.id), ""


def auto(arch) -> Place:
    """For `render` and `validate`: this venv when it has the stack, else the arch's image when present."""
    if venv_has_stack():
        return in_venv()
    place, why = _local_image(arch)
    if place is not None:
        return place
    return nowhere(f"this host has no training stack (light install) and {why}; "
                   f"`make image ARCH={arch.name}` or `make setup` lets them run here")


def for_docker(arch, image_ref: str | None = None) -> Place:
    """RUNTIME=docker: the image the job will run; a missing daemon or image stops here (the job could not run).
    A GPU arch on a host without any GPU is said first: no image would help there."""
    from ..hardware import host
    from ..image.docker_api import connect
    from ..launch.docker.checks import no_gpu
    from ..launch.docker.daemon import resolve_image

    missing = no_gpu(arch, host.gather(tools=False)) if arch.is_gpu else []
    try:
        tag, image = resolve_image(connect(), arch, image_ref)
    except ProblemReport as report:
        raise ProblemReport(missing + report.problems) from None
    if missing:
        raise ProblemReport(missing)
    return in_image(tag, image.id)


def for_slurm(arch, container: str, sif: str | None, image: str | None) -> Place:
    if container == "none":
        return in_venv()  # the job runs this venv's python on the nodes
    if container == "apptainer":
        if not sif or not Path(sif).is_file():
            return nowhere(f"no Apptainer image at {sif} on this host")
        if shutil.which("apptainer") is None:
            return nowhere("apptainer is not installed on this host (the nodes have it)")
        return in_sif(sif)
    place, why = _local_image(arch, image)
    return place or nowhere(f"the job's image is not on this host's Docker daemon ({why})")


def for_k8s(arch, image: str) -> Place:
    place, why = _local_image(arch, image)
    return place or nowhere(f"the job's image {image} is not on this host's Docker daemon ({why}); the cluster pulls it")


def default_runtime(arch) -> str:
    return "docker" if arch.is_gpu else "local"


def for_runtime(runtime: str | None, args: Any = None, root: Path | None = None) -> Callable[[Any], Place]:
    """A chooser for `pipeline.prepare`: it needs the recipe's arch, which only prepare knows."""
    def choose(arch) -> Place:
        runtime_ = runtime or default_runtime(arch)
        if runtime_ == "local":
            return in_venv()
        if runtime_ == "docker":
            return for_docker(arch, getattr(args, "docker_image", None))
        if runtime_ == "slurm":
            from ..io import paths
            from ..launch.slurm.options import options_from_args

            opts = options_from_args(args, arch, root or paths.root())
            return for_slurm(arch, opts.container, opts.sif, opts.image)
        if runtime_ == "k8s":
            from ..launch.slurm.options import default_image

            return for_k8s(arch, getattr(args, "container_image", None) or default_image(arch.name))
        return auto(arch)

    return choose


# ---- running

def container_request(image_id: str, root: Path, request_file: Path, uid: int, gid: int) -> dict[str, Any]:
    """`client.containers.create(**...)` for one validation: the project read-only at its own path (the
    rendered files name paths relative to it), this checkout's rocmft first on the path (the image's copy
    may be older than the code that rendered the files), no devices, no network, the invoking user."""
    root = str(root)
    return dict(
        image=image_id,
        command=[*ENTRY, str(request_file)],
        volumes={root: {"bind": root, "mode": "ro"}},
        working_dir=root,
        environment={"PYTHONPATH": f"{root}/src", "PYTHONDONTWRITEBYTECODE": "1", "ROCMFT_SKIP_GPU_CHECK": "1",
                     "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HOME": "/tmp"},
        user=f"{uid}:{gid}",
        network_disabled=True,
        labels={"ai.rocmft.role": "validate", "ai.rocmft.project": root},  # whose checkout, for `docker ps`
    )


def apptainer_argv(sif: str, root: Path, request_file: Path) -> list[str]:
    return ["apptainer", "exec", "--containall", "--bind", f"{root}:{root}:ro", "--pwd", str(root),
            "--env", f"PYTHONPATH={root}/src,HF_HUB_OFFLINE=1,HF_DATASETS_OFFLINE=1", sif, *ENTRY, str(request_file)]


def _write_request(data: dict[str, Any], root: Path, key: str) -> Path:
    from ..io import paths

    folder = paths.cache_dir() / "validate"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key[:16]}.json"
    import json

    path.write_text(json.dumps(data))
    return path


def _answer(place: Place, output: str, code: int) -> list[Problem]:
    problems = req.parse_answer(output)
    if problems is None:
        tail = " | ".join(line for line in output.strip().splitlines()[-3:]) or f"exit {code}"
        return [Problem("", "", f"the checks in {place.label} did not answer (exit {code}): {tail[:400]}",
                        f"`make image ARCH=...` rebuilds the image; the full output: {' '.join(ENTRY)} inside it")]
    return problems


def _run_docker(place: Place, root: Path, request_file: Path) -> list[Problem]:
    from ..image.docker_api import connect

    client = connect()
    container = client.containers.create(**container_request(place.ref, root, request_file, os.getuid(), os.getgid()))
    try:
        container.start()
        try:
            code = container.wait(timeout=TIMEOUT_S).get("StatusCode", 1)
        except Exception:  # requests' ReadTimeout: the checker hung (a stuck import, a full disk)
            return [Problem("", "", f"the checks in {place.label} did not finish within {TIMEOUT_S} s",
                            "`docker run --rm -it <image> bash` and import llamafactory to see why")]
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    return _answer(place, output, code)


def _run_apptainer(place: Place, root: Path, request_file: Path) -> list[Problem]:
    try:
        proc = subprocess.run(apptainer_argv(place.ref, root, request_file), capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return [Problem("", "", f"the checks in {place.label} did not finish within {TIMEOUT_S} s")]
    return _answer(place, proc.stdout + proc.stderr, proc.returncode)


def run(place: Place, data: dict[str, Any], root: Path, key: str) -> list[Problem]:
    """The stack's problems for one rendered run, from wherever `place` says."""
    if place.kind == "none":
        return [Problem("", "", f"{NOT_RUN}: {place.reason}",
                        "they run when the job starts", severity="warning")]
    if place.kind == "venv":
        from . import check_stack

        try:
            return check_stack(data["args"], data["ds_config"], data["arch"], int(data["world_size"]),
                               data["train_file"], data["ds_file"])
        except ImportError as exc:
            raise ProblemReport([Problem("", "", f"cannot validate: {exc.name or exc} is not installed here",
                                         "run `make setup` (the CPU training stack: RUNTIME=local validates and "
                                         "trains in it)")]) from None
    request_file = _write_request(data, root, key)
    try:
        if place.kind == "docker":
            return _run_docker(place, root, request_file)
        return _run_apptainer(place, root, request_file)
    finally:
        request_file.unlink(missing_ok=True)
