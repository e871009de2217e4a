"""RUNTIME=k8s: the launch plan as a Kubeflow Training Operator PyTorchJob in the run dir.

rocmft renders, the user applies (`kubectl apply -f <run>/pytorchjob.yaml`): nothing here talks to a cluster.
One pod per node (Master + Workers), each running the plan's argv (torchrun with a static rendezvous:
`--node_rank $(RANK) --master_addr $(MASTER_ADDR) --master_port $(MASTER_PORT)`, variables the operator
sets in every pod and Kubernetes expands in the command), `amd.com/gpu` from the AMD device plugin, the
project checkout on a ReadWriteMany PVC mounted at /workspace (the plan's paths are relative to it), a
memory-backed /dev/shm, and secrets only as Secret references.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from .. import __version__
from ..hardware.arches import Arch
from ..io import hostio, paths
from ..io.problems import Problem, raise_if_errors
from ..recipe.recipes import SECRET_ENV, Recipe
from ..run import runs
from . import names, slurm
from .plan import LaunchPlan

MANIFEST = "pytorchjob.yaml"
TEMPLATE = "pytorchjob.yaml.j2"
MOUNT = "/workspace"  # the image's WORKDIR; the project PVC is mounted here
CONTAINER_NAME = "pytorch"  # the operator finds the training container and its port by these names
PORT_NAME = "pytorchjob-port"
PORT = 23456
DEFAULT_PVC = "rocmft"
DEFAULT_SECRET = "rocmft-secrets"
# Path-valued variables a plan may carry from the host: rewritten under the mount, or dropped.
PATH_VARS = ("HF_HOME", "HF_HUB_CACHE", "TORCH_EXTENSIONS_DIR", "MPLCONFIGDIR")
PLACEHOLDERS = {"$(RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)"}


def add_arguments(parser) -> None:
    slurm.add_shared_arguments(parser)
    slurm._add_once(parser, "--k8s-namespace", dest="k8s_namespace", default=None,
                    help="k8s: namespace written into the PyTorchJob (K8S_NAMESPACE=; default: kubectl's current)")
    slurm._add_once(parser, "--k8s-pvc", dest="k8s_pvc", default=None,
                    help=f"k8s: ReadWriteMany PVC holding the project checkout (K8S_PVC=, default {DEFAULT_PVC})")
    slurm._add_once(parser, "--k8s-secret", dest="k8s_secret", default=None,
                    help=f"k8s: Secret with HF_TOKEN etc. (K8S_SECRET=, default {DEFAULT_SECRET}; optional)")


def job_name(run_name: str) -> str:
    """A DNS-1035 label short enough for `<name>-worker-NN` pod names and services."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_name.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if not name.startswith("rocmft-"):
        name = f"rocmft-{name}"
    return name[:52].rstrip("-")


def seconds(time_limit: str) -> int:
    """Slurm's time format -> seconds (activeDeadlineSeconds): 90, 10:00, 01:00:00, 1-00, 1-02:03:04."""
    days = 0
    if "-" in time_limit:
        d, time_limit = time_limit.split("-", 1)
        days = int(d)
        parts = [int(p) for p in time_limit.split(":")]
        parts += [0] * (3 - len(parts))  # days-hours[:minutes[:seconds]]
        h, m, s = parts
    else:
        parts = [int(p) for p in time_limit.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0  # minutes
        elif len(parts) == 2:
            h, m, s = 0, parts[0], parts[1]  # minutes:seconds
        else:
            h, m, s = parts
    return ((days * 24 + h) * 60 + m) * 60 + s


def pod_env(plan: LaunchPlan, root: Path, secret: str, secret_names: tuple[str, ...] = ()) -> tuple[list[dict[str, Any]], list[str]]:
    """The plan's env for a pod: host paths under the project moved under the mount; others dropped (noted)."""
    env: dict[str, str] = {}
    dropped = []
    for name, value in sorted(plan.env.items()):
        if name in PATH_VARS and os.path.isabs(value):
            path = Path(value)
            if path == root or root in path.parents:
                value = str(Path(MOUNT) / path.relative_to(root))
            else:
                dropped.append(name)
                continue
        env[name] = value
    env.setdefault("HF_HOME", f"{MOUNT}/.cache/huggingface")  # on the PVC: every pod shares one cache
    env["ROCMFT_ROOT"] = MOUNT
    items: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    for name in dict.fromkeys((*SECRET_ENV, *secret_names)):
        if name in plan.unset_env:  # withheld from this job (recipe_env.withheld)
            continue
        items.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name, "optional": True}}})
    return items, dropped


def pod_template(plan: LaunchPlan, recipe: Recipe, arch: Arch, *, image: str, pvc: str, secret: str, root: Path,
                 labels: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    env, dropped = pod_env(plan, root, secret, recipe.secrets)
    if arch.is_gpu:
        resources = {"limits": {"amd.com/gpu": plan.nproc_per_node}}
    else:
        resources = {"requests": {"cpu": str(plan.nproc_per_node)}}
    container = {
        "name": CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(plan.argv),
        "workingDir": MOUNT,
        "env": env,
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "resources": resources,
        "volumeMounts": [{"name": "project", "mountPath": MOUNT}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    spec = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [
            {"name": "project", "persistentVolumeClaim": {"claimName": pvc}},
            # NCCL/RCCL and the dataloader use shared memory; a container's default /dev/shm is 64 MB.
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    return {"metadata": {"labels": dict(labels)}, "spec": spec}, dropped


def build_job(plan: LaunchPlan, recipe: Recipe, arch: Arch, *, name: str, run_name: str, image: str, pvc: str,
              secret: str, namespace: str | None, deadline_s: int, root: Path) -> tuple[dict[str, Any], list[str]]:
    labels = {"app.kubernetes.io/name": "rocmft", "app.kubernetes.io/version": __version__,
              "rocmft/recipe": recipe.name[:63], "rocmft/run": run_name[:63], "rocmft/arch": arch.name}
    template, dropped = pod_template(plan, recipe, arch, image=image, pvc=pvc, secret=secret, root=root, labels=labels)
    replica = {"replicas": 1, "restartPolicy": "Never", "template": template}
    specs: dict[str, Any] = {"Master": replica}
    if recipe.nodes > 1:
        specs["Worker"] = {"replicas": recipe.nodes - 1, "restartPolicy": "Never", "template": json.loads(json.dumps(template))}
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {
            "nprocPerNode": str(plan.nproc_per_node),
            # A static rendezvous cannot take a restarted pod back: fail once, loudly, and keep the pods' logs.
            "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None", "activeDeadlineSeconds": deadline_s},
            "pytorchReplicaSpecs": specs,
        },
    }
    return job, dropped


def structure_problems(job: Mapping[str, Any], nodes: int, nproc: int) -> list[Problem]:
    """What the training operator needs of a PyTorchJob (its CRD schema is not in kubernetes-validate)."""
    problems: list[Problem] = []

    def bad(message: str) -> None:
        problems.append(Problem(MANIFEST, "", message))

    if job.get("apiVersion") != "kubeflow.org/v1" or job.get("kind") != "PyTorchJob":
        bad("must be apiVersion kubeflow.org/v1, kind PyTorchJob")
    name = job.get("metadata", {}).get("name", "")
    if not re.fullmatch(r"[a-z]([-a-z0-9]{0,50}[a-z0-9])?", name):
        bad(f"metadata.name `{name}` is not a DNS-1035 label of at most 52 characters")
    specs = job.get("spec", {}).get("pytorchReplicaSpecs", {})
    if set(specs) - {"Master", "Worker"}:
        bad(f"unknown replica types {sorted(set(specs) - {'Master', 'Worker'})}")
    master = specs.get("Master") or {}
    if master.get("replicas") != 1:
        bad("exactly one Master replica (the operator's MASTER_ADDR points at it)")
    total = sum(int(s.get("replicas", 0)) for s in specs.values())
    if total != nodes:
        bad(f"{total} replicas for {nodes} nodes")
    if job.get("spec", {}).get("nprocPerNode") != str(nproc):
        bad(f"nprocPerNode must be the string \"{nproc}\"")
    for kind, spec in specs.items():
        if spec.get("restartPolicy") not in ("Never", "OnFailure", "Always", "ExitCode"):
            bad(f"{kind}.restartPolicy `{spec.get('restartPolicy')}` is not one the operator knows")
        containers = spec.get("template", {}).get("spec", {}).get("containers", [])
        main = [c for c in containers if c.get("name") == CONTAINER_NAME]
        if not main:
            bad(f"{kind}: no container named `{CONTAINER_NAME}` (the operator injects its env there)")
            continue
        ports = [p for p in main[0].get("ports", []) if p.get("name") == PORT_NAME]
        if not ports:
            bad(f"{kind}: container port `{PORT_NAME}` missing (MASTER_PORT comes from it)")
        command = main[0].get("command", [])
        for token in PLACEHOLDERS if nodes > 1 else ():
            if token not in command:
                bad(f"{kind}: command does not take {token} from the operator")
    deadline = job.get("spec", {}).get("runPolicy", {}).get("activeDeadlineSeconds")
    if not isinstance(deadline, int) or deadline <= 0:
        bad("runPolicy.activeDeadlineSeconds must be a positive time limit")
    return problems


def render_manifest(job: Mapping[str, Any], recipe: Recipe, arch: Arch, *, manifest_path: str, pvc: str, secret: str,
                    namespace: str | None) -> str:
    from ..recipe.render import environment

    return environment().get_template(TEMPLATE).render(
        version=__version__, recipe=recipe.name, arch=arch.name, nodes=recipe.nodes,
        nproc=job["spec"]["nprocPerNode"], image=job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"],
        manifest_path=manifest_path, namespace=namespace, name=job["metadata"]["name"], pvc=pvc, secret=secret,
        mount=MOUNT, job=job,
    )


def option_problems(args) -> list[Problem]:
    """The options as text, before anything else runs: each ends up in the manifest (its comments too)."""
    time_limit = str(getattr(args, "time_limit", None) or slurm.DEFAULT_TIME).strip()
    problems: list[Problem] = []
    if not slurm._TIME.match(time_limit):  # one time format for both runtimes
        problems.append(Problem("", "TIME", f"`{time_limit}` is not a time limit", "e.g. TIME=04:00:00 (hours:minutes:seconds)"))
    problems += names.check("K8S_NAMESPACE", getattr(args, "k8s_namespace", None), names.DNS_LABEL,
                            "a namespace name (a DNS label: a-z, 0-9 and -, at most 63)", 63)
    for key, attr in (("K8S_PVC", "k8s_pvc"), ("K8S_SECRET", "k8s_secret")):
        problems += names.check(key, getattr(args, attr, None), names.DNS_SUBDOMAIN,
                                "a Kubernetes object name (a-z, 0-9, - and ., at most 253)", 253)
    problems += names.check("CONTAINER_IMAGE", getattr(args, "container_image", None), names.IMAGE_REF,
                            "an image reference")
    return problems


def check(prep, args) -> list[Problem]:
    """The checks before the run dir exists: errors raise together, warnings are returned for the CLI to print."""
    problems = option_problems(args) + names.check("RECIPE", prep.recipe.name)
    if getattr(args, "gpus", None):
        problems.append(Problem("", "GPUS", "GPUS= picks cards on this machine; in a pod the device plugin decides",
                                "use SET=gpus_per_node=N"))
    # (global batch and resume across world sizes: checked for every runtime by pipeline.prepare)
    return raise_if_errors(problems)


def launch(prep, args) -> int:
    """`rocmft train --runtime k8s`: check, render <run>/pytorchjob.yaml, print the kubectl command.

    The CLI runs `check` first and prints its warnings; it runs again here so no caller skips it."""
    import dataclasses

    from . import prepared

    root = paths.root()
    time_limit = str(getattr(args, "time_limit", None) or slurm.DEFAULT_TIME).strip()
    check(prep, args)

    prep = dataclasses.replace(prep, gpus=None)
    plan = prepared.build_plan(prep, python="python", node_rank="$(RANK)", master_addr="$(MASTER_ADDR)",
                               master_port="$(MASTER_PORT)")
    image = getattr(args, "container_image", None) or slurm.default_image(prep.arch.name)
    pvc = getattr(args, "k8s_pvc", None) or DEFAULT_PVC
    secret = getattr(args, "k8s_secret", None) or DEFAULT_SECRET
    namespace = getattr(args, "k8s_namespace", None) or None
    run_name = prep.run_dir.name
    job, dropped = build_job(plan, prep.recipe, prep.arch, name=job_name(run_name), run_name=run_name, image=image,
                             pvc=pvc, secret=secret, namespace=namespace, deadline_s=seconds(time_limit), root=root)
    raise_if_errors(structure_problems(job, prep.recipe.nodes, plan.nproc_per_node))
    run_dir = prepared.commit(prep, plan, runtime="k8s", image=image)
    rel = runs.relative(run_dir)
    runs.mark(run_dir, "rendered", runtime="k8s", k8s_job=job["metadata"]["name"])
    manifest = render_manifest(job, prep.recipe, prep.arch, manifest_path=f"{rel}/{MANIFEST}", pvc=pvc, secret=secret,
                               namespace=namespace)
    hostio.write_text(run_dir / MANIFEST, manifest)
    ns = f" -n {namespace}" if namespace else ""
    print(f"[rocmft] run dir: {rel}", flush=True)
    print(f"[rocmft] PyTorchJob: {rel}/{MANIFEST} ({slurm.layout_text(prep.recipe)}, image {image})", flush=True)
    for name in dropped:
        print(f"[rocmft] note: {name}={plan.env[name]} is a path outside the project: not passed to the pods "
              f"(they use {MOUNT}/.cache)", flush=True)
    if "/" not in image.split(":")[0]:
        print(f"[rocmft] note: {image} is a local tag: push it to a registry the cluster pulls from and render with "
              "CONTAINER_IMAGE=<registry>/<name>:<tag>", flush=True)
    print(f"[rocmft] the pods read {rel} from the PVC `{pvc}` (at {MOUNT}): render from a checkout on that volume, "
          f"or copy the run dir there first", flush=True)
    print(f"[rocmft] rocmft does not talk to the cluster; start it with:  kubectl apply -f {rel}/{MANIFEST}{ns}", flush=True)
    print(f"[rocmft] follow: kubectl logs -f {job['metadata']['name']}-master-0{ns}", flush=True)
    return 0


def manifest_documents(text: str) -> list[Any]:
    """The YAML documents of a rendered manifest (for tests and checks)."""
    import yaml

    return [d for d in yaml.safe_load_all(text) if d is not None]


def pod_from_template(job: Mapping[str, Any], replica: str = "Master") -> dict[str, Any]:
    """A replica's pod template as a core v1 Pod: what kubernetes-validate can check offline."""
    template = job["spec"]["pytorchReplicaSpecs"][replica]["template"]
    metadata = dict(template.get("metadata", {}))
    metadata["name"] = f"{job['metadata']['name']}-{replica.lower()}-0"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}

