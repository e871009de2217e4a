"""The CPU image, for real: built by CI beforehand (this file never builds it):

    eval "$(scripts/ci/dockerd-up.sh)"; scripts/ci/build-cpu-base.sh
    make wheelhouse ARCH=cpu; make image ARCH=cpu OFFLINE=1

Skipped only when no Docker daemon is configured at all (no DOCKER_HOST, no /var/run/docker.sock).
With a daemon configured, an unreachable daemon or a missing image FAILS: CI must have built it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.hardware.versions import from_lock, read_pins
from rocmft.image import build_plan, docker_api, find_image, image_arch
from rocmft.image.docker_api import daemon_configured
from rocmft.io.problems import ProblemReport

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
BUILD_HINT = "build it first: eval \"$(scripts/ci/dockerd-up.sh)\"; scripts/ci/build-cpu-base.sh; " \
             "make wheelhouse ARCH=cpu; make image ARCH=cpu OFFLINE=1"


@pytest.fixture(scope="module")
def client():
    if not daemon_configured():
        pytest.skip(reason="no Docker daemon configured (DOCKER_HOST unset, no /var/run/docker.sock): "
                    "eval \"$(scripts/ci/dockerd-up.sh)\" to run these")
    try:
        return docker_api.connect()
    except ProblemReport as report:
        pytest.fail(f"a Docker daemon is configured but not reachable: {report}")


# A locally built variant under a tag of its own (a daemon shared with other checkouts), as test_container_restart.
OWN_TAG = os.environ.get("ROCMFT_TEST_CPU_IMAGE", "")


@pytest.fixture(scope="module")
def image(client):
    found = docker_api.get_image(client, OWN_TAG) if OWN_TAG else find_image(client, "cpu")
    if found is None:
        pytest.fail(f"no rocmft image for cpu ({OWN_TAG or 'rocmft:<version>-cpu / rocmft:cpu'}): {BUILD_HINT}")
    return found


def run_container(client, image, command=None, *, environment=None, timeout=300):
    """Run to completion with no network and an init (as the launcher does); (exit code, output)."""
    container = client.containers.create(image.id, command, environment=environment or {}, init=True,
                                         network_mode="none", working_dir="/workspace")
    try:
        container.start()
        status = container.wait(timeout=timeout)
        return status["StatusCode"], container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)


def test_image_labels_say_what_it_holds(image):
    labels = docker_api.image_labels(image)
    plan = build_plan(arches.table()["cpu"], from_lock(), labels.get("ai.rocmft.commit", ""), offline=True)
    assert image_arch(image) == "cpu"
    for key, value in plan.labels.items():
        if key in ("ai.rocmft.commit", "org.opencontainers.image.revision"):
            continue
        assert labels.get(key) == value, f"label {key}: image has {labels.get(key)!r}, plan says {value!r}"
    commit = labels["ai.rocmft.commit"]
    assert commit == labels["org.opencontainers.image.revision"] and (len(commit) >= 40 or commit == "unknown")
    assert labels["ai.rocmft.selfcheck"] == "passed" and labels["ai.rocmft.offline"] == "1"
    assert image.tags and {OWN_TAG or "rocmft:cpu"} <= set(image.tags)


def test_default_command_shows_the_build_time_self_check(client, image):
    code, out = run_container(client, image)
    assert code == 0, out
    assert "self-check (cpu" in out and "PASSED" in out
    for name in ("torch", "llamafactory imports", "deepspeed imports", "no nvidia packages"):
        assert f"ok   {name}" in out, out


PROBE = r"""
import json, os, shutil, subprocess, sys
import torch, llamafactory, deepspeed, transformers
import lm_eval, lm_eval.evaluator, lm_eval.models.huggingface, lm_eval.models.openai_completions
import llamafactory.data.mm_plugin, llamafactory.hparams
from importlib import metadata
dists = sorted(d.metadata["Name"].lower() for d in metadata.distributions())
print(json.dumps({
    "torch": torch.__version__, "hip": torch.version.hip, "cuda": torch.version.cuda,
    "llamafactory": llamafactory.__version__, "deepspeed": deepspeed.__version__, "lm-eval": metadata.version("lm_eval"),
    "nvidia": [d for d in dists if d.startswith("nvidia")], "torchvision": "torchvision" in dists,
    "tools": {t: shutil.which(t) for t in ("python", "torchrun", "llamafactory-cli", "rocmft", "lm_eval")},
    "wheelhouse": os.path.exists("/wheelhouse"), "workspace": sorted(os.listdir("/workspace")),
    "cwd": os.getcwd(), "rocmft": __import__("rocmft").__version__,
    "selfcheck": json.load(open("/opt/rocmft/selfcheck.json"))["passed"],
}))
"""


def test_container_imports_the_stack_and_holds_no_build_leftovers(client, image):
    code, out = run_container(client, image, ["python", "-c", PROBE])
    assert code == 0, out
    data = json.loads(out.strip().splitlines()[-1])
    versions = from_lock()
    assert data["torch"].split("+")[0] == versions.torch_cpu and data["hip"] is None and data["cuda"] is None
    assert (data["llamafactory"], data["deepspeed"]) == (versions.llamafactory, versions.deepspeed)
    # lm-evaluation-harness (`make eval TASKS=` in the container): imported above, its hf and API clients too
    assert data["lm-eval"] == read_pins(ROOT / "requirements" / "lock.txt")["lm-eval"]
    assert data["nvidia"] == [] and data["torchvision"] is False
    assert all(data["tools"].values()), data["tools"]
    assert all(path.startswith("/opt/rocmft/venv/bin/") for path in data["tools"].values())
    assert data["wheelhouse"] is False  # the wheelhouse stays in the build stage
    assert data["workspace"] == [] and data["cwd"] == "/workspace"  # recipes/data are mounted, never baked
    assert data["selfcheck"] is True


def test_entrypoint_refuses_a_gpu_arch_without_devices(client, image):
    # The cpu image told it is a gfx942 image: no /dev/kfd in this container, so the check must stop it.
    code, out = run_container(client, image, ["echo", "should-not-run"], environment={"ROCMFT_IMAGE_ARCH": "gfx942"})
    assert code == 2, out
    assert "should-not-run" not in out
    assert "/dev/kfd is missing" in out and "--device=/dev/kfd" in out and "--device=/dev/dri" in out
    code, out = run_container(client, image, ["echo", "ran"],
                              environment={"ROCMFT_IMAGE_ARCH": "gfx942", "ROCMFT_SKIP_GPU_CHECK": "1"})
    assert code == 0 and "ran" in out


def test_image_is_lean(image):
    # venv (~2 GB) on a ~170 MB base: the ~530 MB wheelhouse must not be in any layer of the final image.
    assert image.attrs["Size"] < 3.2e9, f"image is {image.attrs['Size'] / 1e9:.2f} GB"


def test_image_info_reads_the_labels(image, capsys):
    assert main(["image-info", "cpu", *(["--image", OWN_TAG] if OWN_TAG else [])]) == 0
    out = capsys.readouterr().out
    assert (OWN_TAG or "rocmft:cpu") in out and "llamafactory" in out and "selfcheck" in out and "passed" in out


def test_offline_check_of_a_missing_base_does_not_pull(client):
    ref = "rocmft-base:no-such-image-for-tests"
    with pytest.raises(ProblemReport) as info:
        docker_api.require_base(client, ref, offline=True, arch="cpu")
    assert "not present locally" in info.value.problems[0].message
    assert docker_api.get_image(client, ref) is None


def test_kernel_stage_is_cached_after_a_pin_bump_read_from_the_build_output(client, tmp_path, capsys):
    """Build the CPU image (up to its deps stage) from a copy of the project, bump a pin the kernel stage does not
    read in a copy of lock.txt, rebuild: the daemon's own output must say the kernel stage was cached (and the
    deps stage was not: the bump was seen). Built under a test tag and removed. The ratio is printed, not
    asserted; on cpu the kernel stage compiles nothing, so it shows the cost of a pin bump (docs/image.md)."""
    import dataclasses
    import re
    import shutil
    import time

    from rocmft.image import build
    from rocmft.image.kernels import STAGE

    root = tmp_path / "proj"
    root.mkdir()
    for rel in (".dockerignore", "docker", "pyproject.toml", "README.md", "requirements", "src"):
        src = ROOT / rel
        (shutil.copytree(src, root / rel, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
         if src.is_dir() else shutil.copy(src, root / rel))
    wheels = ROOT / "wheelhouse" / "cpu"
    if not any(wheels.glob("*.whl")):
        pytest.fail(f"no cpu wheelhouse at {wheels}: {BUILD_HINT}")
    arch = arches.table()["cpu"]
    base_id = docker_api.get_image(client, arch.base_image).id
    tag = "rocmft-image-test:pin-bump"

    def build_once(name: str):
        plan = build_plan(arch, from_lock(root / "requirements" / "lock.txt"), "test", offline=True,
                          wheelhouse=str(wheels), context=str(root), base_id=base_id,
                          kernel_cache_root=str(tmp_path / "kernel-cache"))
        # Up to the deps stage: it reads lock.txt, the kernel stage before it must not. The image stage after
        # it only copies its venv (and would add a minute of CI to prove nothing more).
        plan = dataclasses.replace(plan, tags=(tag,), target="deps")
        started = time.monotonic()
        result = build.run(client, plan, log_path=tmp_path / f"{name}.log")
        assert result.ok, "\n".join(result.tail[-20:])
        return result, time.monotonic() - started

    first = again = None
    try:
        first, first_s = build_once("first")
        lock = root / "requirements" / "lock.txt"
        text = lock.read_text()
        # A pin the image never installs (a dev tool), so the offline rebuild still resolves; a new value each
        # run, so no earlier run's layers can answer for it.
        bumped = re.sub(r"^(pytest==)(\S+)", rf"\g<1>0.0.{int(time.time())}", text, count=1, flags=re.M)
        assert bumped != text, "no pytest pin in lock.txt to bump"
        lock.write_text(bumped)
        again, again_s = build_once("rebuild")
    finally:
        if docker_api.get_image(client, tag) is not None:
            client.images.remove(tag)
        # The bumped deps stage is no ancestor of the image (COPY --from): remove its ~2 GB of layers too. Its
        # untagged parents go with it up to the first layer another image still uses (the kernel stage stays).
        # So is the first build's, when this test built it (when it was cached, it is the CI image's cache: kept).
        built = [r for r in (first, again) if r is not None and r.stage("deps") and not r.stage("deps").cached]
        for deps_id in (r.stage("deps").image_id for r in built):
            if deps_id and docker_api.get_image(client, deps_id) is not None:
                client.images.remove(deps_id)
    kernel, deps = again.stage(STAGE), again.stage("deps")
    assert kernel is not None and kernel.work_steps >= 2, [dataclasses.asdict(s) for s in again.stages]
    assert kernel.cached, f"kernel stage rebuilt after a lock.txt bump: {dataclasses.asdict(kernel)}"
    assert not deps.cached, "the deps stage did not see the bumped lock.txt"
    with capsys.disabled():
        print(f"\n  first build {first_s:.0f} s (kernel stage {first.stage(STAGE).seconds:.1f} s, "
              f"{'cached' if first.stage(STAGE).cached else 'built'}); rebuild after the pin bump {again_s:.0f} s "
              f"(kernel stage cached, {kernel.seconds:.1f} s); rebuild/first = {again_s / max(first_s, 1e-9):.2f}"
              + ("  [the first build was warm from an earlier build of this Dockerfile]" if first.stage("deps").cached
                 else ""))


def test_kernel_stage_reuses_a_host_kept_wheel_and_hands_it_back(client, tmp_path):
    """The gfx942 kernel stage, built alone on the CPU base (seconds): given a wheel kept on the host it compiles
    nothing, records `host`, and its /kernels/wheels holds that wheel byte for byte (what `make image` copies to
    the host after a compile, and what the deps stage installs). Built under a test tag, removed after."""
    import dataclasses
    from types import MappingProxyType

    from rocmft.image import build
    from rocmft.image.kernels import STAGE, head_dims_for_build

    base = arches.table()["cpu"].base_image
    plan = build_plan(arches.table()["gfx942"], from_lock(), "test", offline=True, context=str(ROOT),
                      kernel_cache_root=str(tmp_path / "wheelhouse" / "gfx942"))
    wheel = Path(plan.kernel_cache) / "flash_attn-2.8.3.post2-cp312-cp312-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"not a real wheel: the stage only copies it\n" * 100)
    plan = dataclasses.replace(plan, target=STAGE, tags=("rocmft-image-test:kernels",), kernel_wheels=(str(wheel),),
                               buildargs=MappingProxyType({**plan.buildargs, "BASE_IMAGE": base}))
    try:
        result = build.run(client, plan, log_path=tmp_path / "kernels.log")
        assert result.ok, "\n".join(result.tail[-20:])
        record = build.kernel_record(client, result.image_id)
        files = docker_api.read_files(client, result.image_id, "/kernels/wheels")
        again = build.run(client, plan, log_path=tmp_path / "again.log")
    finally:
        if docker_api.get_image(client, plan.tags[0]) is not None:
            client.images.remove(plan.tags[0])
    # the model table's head dims, rounded up to flash-attn's generator dims (Gemma 3's 256 since issue 45)
    dims = ",".join(map(str, head_dims_for_build()[0]))
    assert (record["source"], record["backend"], record["gpu_archs"], record["head_dims"]) == ("host", "ck", "gfx942", dims)
    assert dims == "64,128,256"
    assert record["wheels"] == wheel.name and files == {wheel.name: wheel.read_bytes()}
    assert again.stage(STAGE).cached  # the same wheel again: Docker's cache, not even a copy


def test_a_failed_kernel_stage_ends_with_its_own_lines_and_the_log(client, tmp_path):
    """A real failure in seconds: the gfx942 kernel stage on the CPU base, with no kept wheel and no torch to
    build against. The report names the step and its stage, shows that step's own last lines and the log."""
    import dataclasses
    from types import MappingProxyType

    from rocmft.image import build
    from rocmft.image.kernels import STAGE

    plan = build_plan(arches.table()["gfx942"], from_lock(), "test", offline=True, context=str(ROOT))
    plan = dataclasses.replace(plan, target=STAGE, tags=("rocmft-image-test:fails",),
                               buildargs=MappingProxyType({**plan.buildargs, "BASE_IMAGE": arches.table()["cpu"].base_image}))
    result = build.run(client, plan, log_path=tmp_path / "fails.log")
    assert not result.ok and docker_api.get_image(client, plan.tags[0]) is None
    lines = build.failed_step_lines(result)
    assert lines[0].startswith("==> the failing step's last lines (step ") and "RUN set -eux" in lines[0]
    assert any("No module named 'torch'" in line for line in lines), lines
    assert not any(line.startswith("  | Step ") for line in lines)  # only the failing step's own lines
    problem = build.failure_report(result, plan, "make wheelhouse ARCH=gfx942").problems[0]
    assert problem.key.endswith("(stage kernels)") and problem.suggestion == f"full log: {tmp_path / 'fails.log'}"
    assert "No module named 'torch'" in (tmp_path / "fails.log").read_text()


def test_a_base_image_pinned_by_digest_is_refused_when_the_local_one_is_another(client, tmp_path):
    """L10 (issue 43): the arch table pinned base images by tag only, so whatever the tag named on the build host
    went into the image. With `base_image_digest`, `make image` checks the local base (the real CPU base on the
    real daemon) before building: another image under the tag is refused in one line, the pinned one passes."""
    from rocmft.image import docker_api as api

    base = arches.table()["cpu"].base_image
    real = client.images.get(base).id
    assert api.base_digest_problems(client, base, real, arch="cpu") == []
    [problem] = api.base_digest_problems(client, base, "sha256:" + "0" * 64, arch="cpu")
    assert problem.key == "arches.cpu.base_image_digest" and f"is {real}, not the pinned sha256:{'0' * 64}" in problem.message
    [missing] = api.base_digest_problems(client, "rocmft-no-such-base:x", real, arch="cpu")
    assert "not present locally to be checked" in missing.message
