"""`make train ... DRY_RUN=1`: the whole launch plan, printed, without the hardware.

What a user on a login node checks before booking a cluster, and what a reviewer reads: for RUNTIME=docker the
container (image, devices, groups, environment, mounts, argv, and the same as a `docker run` line), for
RUNTIME=local the process, for slurm the sbatch script and for k8s the PyTorchJob manifest. No GPU, Docker
daemon or Slurm is needed: nothing is asked of them (the image is named by its tag, not looked up; the host's
GPUs are read from sysfs and what a launch would refuse on this host is said, not raised). Only the run dir is
written (plan.json, and container.json / sbatch.sh / pytorchjob.yaml): its state stays `rendered`.
"""

from __future__ import annotations

from ..hardware import host
from ..run import runs
from . import devices, prepared


def lines(runtime: str, prep, args) -> list[str]:
    """The plan as lines for the CLI to print (runtimes return messages; the CLI prints them)."""
    if runtime == "docker":
        return _docker(prep, args)
    if runtime == "local":
        return _local(prep)
    return []


def _env_lines(env, unset=(), secrets=()) -> list[str]:
    out = [f"    {k}={v}" for k, v in sorted(env.items())]
    out += [f"    (unset) {name}" for name in unset]
    out += [f"    {name}=<from your shell, never written>" for name in secrets]
    return out


def _docker(prep, args) -> list[str]:
    from ..image import tags
    from . import docker as rt

    facts = host.gather(tools=False)
    plan = prepared.build_plan(prep, python="python", gpus=devices.choose(prep, facts.gpus))
    image = getattr(args, "docker_image", None) or tags(prep.arch.name)[0]
    spec = rt.container_spec(plan, prep.arch, facts, image=image, args=prep.rendered.args)
    refused = [p.line() for p in (*rt.check_host(plan, prep.arch, facts), *devices.check(plan, prep.arch, facts.gpus))]
    run_dir = prepared.commit(prep, plan, runtime="docker", dry_run=True)
    (run_dir / "container.json").write_text(spec.to_json())
    rel = runs.relative(run_dir)
    out = [(f"[rocmft] dry run (RUNTIME=docker): nothing started; plan in {rel}/plan.json, container in "
            f"{rel}/container.json"),
           f"  image: {spec.image} (looked up at launch: never pulled, its ai.rocmft.arch label must be {prep.arch.name})",
           f"  devices: {', '.join(spec.devices) or 'none'}",
           f"  groups: {', '.join(spec.group_add) or 'none'}   user: {spec.user}   init: {spec.init}",
           (f"  ipc: {spec.ipc_mode or 'private'}   shm: {spec.shm_size or 'host'}   cap_add: "
            f"{', '.join(spec.cap_add) or 'none'}   ulimits: "
            f"{', '.join(f'{u.name}={u.soft}:{u.hard}' for u in spec.ulimits) or 'none'}"),
           "  environment:", *_env_lines(spec.environment, (), spec.secret_env),
           "  mounts:",
           *[f"    {m.source} -> {m.target} ({'ro' if m.read_only else 'rw'}): {m.why}" for m in spec.mounts],
           f"  workdir: {spec.working_dir}",
           f"  argv: {' '.join(spec.command)}",
           f"  as a docker run line: {' '.join(rt.docker_run_argv(spec))}"]
    if refused:
        out.append("  on THIS host a launch would stop here:")
        out += [f"    {line}" for line in refused]
    return out


def _local(prep) -> list[str]:
    gpus = host.gpus_from_sysfs() if prep.arch.is_gpu else []
    plan = prepared.build_plan(prep, gpus=devices.choose(prep, gpus))
    refused = [p.line() for p in devices.check(plan, prep.arch, gpus)]
    run_dir = prepared.commit(prep, plan, runtime="local", dry_run=True)
    rel = runs.relative(run_dir)
    out = [f"[rocmft] dry run (RUNTIME=local): nothing started; plan in {rel}/plan.json",
           "  environment (on top of yours):", *_env_lines(plan.env, plan.unset_env, plan.secret_env),
           f"  argv: {' '.join(plan.argv)}"]
    if refused:
        out += ["  on THIS host a launch would stop here:", *(f"    {line}" for line in refused)]
    return out


def without_submit(args):
    """RUNTIME=slurm: the script is written into the run dir and not submitted (no sbatch needed)."""
    import argparse

    return argparse.Namespace(**{**vars(args), "submit": False})
