"""The Docker side without a daemon: the build context, the event stream, finding images, the base-image
check that never pulls, and the message when no daemon is reachable."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from rocmft.cli.main import main
from rocmft.hardware import arches
from rocmft.hardware.versions import Versions
from rocmft.image import build, build_plan, context, docker_api, find_image, image_arch
from rocmft.io.problems import ProblemReport
from tests.unit.image.image_inputs import copy_image_inputs

ROOT = Path(__file__).resolve().parents[3]
VERSIONS = Versions(project="0.1.0", llamafactory="0.9.5", deepspeed="0.19.8", torch_cpu="2.13.0")


# --- build context ----------------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path):
    """A small project tree with the real .dockerignore and Dockerfile, plus things that must stay out."""
    root = tmp_path / "proj"
    copy_image_inputs(root)
    for rel, text in {"src/rocmft/__init__.py": "", "src/rocmft/__pycache__/x.cpython-311.pyc": "",
                      "docker/arches.yaml": "", "recipes/a.yaml": "", ".venv/bin/python": "", "runs/r/log": "",
                      "requirements/dev.txt": "", "wheelhouse/gfx942/big.whl": "", "models/m/config.json": "",
                      ".git/HEAD": ""}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    wheels = tmp_path / "elsewhere" / "cpu"
    wheels.mkdir(parents=True)
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"w" * 10)
    return root, wheels


def test_context_holds_only_what_the_dockerfile_copies(project):
    root, wheels = project
    plan = build_plan(arches.table()["cpu"], VERSIONS, "c", offline=True, wheelhouse=str(wheels), context=str(root))
    names = [name for name, _ in context.members(plan)]
    for wanted in ("docker/Dockerfile", "docker/entrypoint.sh", "pyproject.toml", "README.md",
                   "requirements/train.txt", "requirements/lock.txt", "src/rocmft/__init__.py",
                   "wheelhouse/cpu", "wheelhouse/cpu/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"):
        assert wanted in names
    for unwanted in ("recipes/a.yaml", ".venv", "runs", "models", ".git", "requirements/dev.txt",
                     "wheelhouse/gfx942/big.whl", "docker/arches.yaml", "src/rocmft/__pycache__/x.cpython-311.pyc"):
        assert not any(n == unwanted or n.startswith(unwanted + "/") for n in names), unwanted


def test_online_context_has_an_empty_wheelhouse_folder(project):
    root, _ = project
    plan = build_plan(arches.table()["gfx942"], VERSIONS, "c", offline=False, context=str(root))
    names = [name for name, _ in context.members(plan)]
    assert "wheelhouse/gfx942" in names
    assert not [n for n in names if n.startswith("wheelhouse/gfx942/")]


def test_context_tar_is_owned_by_root(project):
    root, wheels = project
    plan = build_plan(arches.table()["cpu"], VERSIONS, "c", offline=True, wheelhouse=str(wheels), context=str(root))
    with context.write(plan, io.BytesIO()) as buf:
        with tarfile.open(fileobj=buf) as tar:
            members = {m.name: m for m in tar.getmembers()}
    assert members["wheelhouse/cpu"].isdir()
    assert all(m.uid == 0 and m.gid == 0 for m in members.values())
    assert members["docker/entrypoint.sh"].mode & 0o111  # stays executable
    assert "10 B" not in context.describe(plan) and "files" in context.describe(plan)


def test_the_dockerignore_keeps_the_venv_out_of_the_real_context():
    plan = build_plan(arches.table()["cpu"], VERSIONS, "c", offline=False, context=str(ROOT))
    names = [name for name, _ in context.members(plan)]
    assert "docker/Dockerfile" in names and not any(n.startswith((".venv", "runs/", ".git/")) for n in names)


# --- event stream --------------------------------------------------------------------------------------

def stream(*chunks: str, extra=()):
    return [{"stream": c} for c in chunks] + list(extra)


def test_consume_counts_steps_cache_and_id():
    events = stream("Step 1/3 : FROM x\n", " ---> abc\n", "Step 2/3 : RUN echo hi\n", " ---> Using cache\n",
                    " ---> def\n", "Step 3/3 : LABEL a=b\n", " ---> Running in 1\n", "partial ", "line\n",
                    extra=[{"aux": {"ID": "sha256:feed"}}])
    out, log = io.StringIO(), io.StringIO()
    result = build.consume(events, build.StepDisplay(out), log)
    assert result.ok and result.image_id == "sha256:feed"
    assert (result.steps, result.cached) == (3, 1)
    assert "[ 2/3] RUN echo hi" in out.getvalue() and "cached" in out.getvalue()
    assert "partial line" in log.getvalue()


def test_consume_reports_the_failed_step():
    events = stream("Step 1/2 : FROM x\n", "Step 2/2 : RUN pip install\n",
                    "ERROR: No matching distribution found for peft==0.18.1\n",
                    extra=[{"error": "The command '/bin/sh -c pip install' returned a non-zero code: 1"}])
    result = build.consume(events, build.StepDisplay(io.StringIO()), io.StringIO())
    assert not result.ok and result.failed_step == "2/2 RUN pip install"
    plan = build_plan(arches.table()["cpu"], VERSIONS, "c", offline=True, wheelhouse="/w/cpu")
    report = build.failure_report(result, plan, "make wheelhouse ARCH=cpu")
    assert report.problems[0].key == "peft==0.18.1" and "make wheelhouse ARCH=cpu" in report.problems[0].suggestion


def test_a_failed_step_names_its_stage_and_the_log():
    events = stream("Step 1/3 : FROM x AS base\n", "Step 2/3 : FROM base AS kernels\n", "Step 3/3 : RUN make\n",
                    "error: out of memory\n", extra=[{"error": "The command '/bin/sh -c make' returned a non-zero code: 137"}])
    result = build.consume(events, build.StepDisplay(io.StringIO()), io.StringIO())
    result.log = "/x/image-gfx942.log"
    plan = build_plan(arches.table()["gfx942"], VERSIONS, "c", offline=False)
    problem = build.failure_report(result, plan, "make wheelhouse ARCH=gfx942").problems[0]
    assert problem.key == "step 3/3 RUN make (stage kernels)" and "code: 137" in problem.message
    assert problem.suggestion == "full log: /x/image-gfx942.log" and "error: out of memory" in result.tail
    lines = build.failed_step_lines(result)
    assert lines[0] == "==> the failing step's last lines (step 3/3 RUN make):"
    assert lines[1:] == ["  | error: out of memory", "  | ERROR: The command '/bin/sh -c make' returned a non-zero code: 137"]


# --- images and the daemon ----------------------------------------------------------------------------

class FakeImage:
    def __init__(self, labels):
        self.attrs = {"Config": {"Labels": labels}, "Size": 2_350_000_000, "Created": "2026-12-02T13:00:00Z"}
        self.tags = ["rocmft:cpu"]
        self.id = "sha256:0123456789abcdef"


class FakeImages:
    def __init__(self, present: dict):
        self.present = present
        self.asked: list[str] = []

    def get(self, ref):
        from docker.errors import ImageNotFound

        self.asked.append(ref)
        if ref not in self.present:
            raise ImageNotFound(f"No such image: {ref}")
        return self.present[ref]

    def pull(self, *a, **k):  # pragma: no cover - must never be called
        raise AssertionError("pulled")


class FakeClient:
    def __init__(self, present: dict):
        self.images = FakeImages(present)


def test_find_image_prefers_the_versioned_tag():
    versioned, moving = FakeImage({"ai.rocmft.arch": "cpu"}), FakeImage({"ai.rocmft.arch": "cpu"})
    client = FakeClient({"rocmft:0.1.0-cpu": versioned, "rocmft:cpu": moving})
    assert find_image(client, "cpu") is versioned
    client = FakeClient({"rocmft:gfx942": moving})
    assert find_image(client, "gfx942") is moving and image_arch(moving) == "cpu"
    assert find_image(FakeClient({}), "gfx1100") is None
    # CI's rehearsal image (a CPU torch inside), retagged as a usable one, is never found.
    rehearsal = FakeImage({"ai.rocmft.arch": "gfx942", "ai.rocmft.rehearsal": "1"})
    assert find_image(FakeClient({"rocmft:gfx942": rehearsal}), "gfx942") is None


def test_offline_build_with_a_missing_base_never_pulls():
    client = FakeClient({})
    with pytest.raises(ProblemReport) as info:
        docker_api.require_base(client, "rocmft-base:cpu", offline=True, arch="cpu")
    problem = info.value.problems[0]
    assert "not present locally" in problem.message and "never pulls" in problem.message
    assert "scripts/ci/build-cpu-base.sh" in problem.suggestion
    with pytest.raises(ProblemReport) as info:
        docker_api.require_base(client, "rocm/pytorch:x", offline=True, arch="gfx942")
    assert "docker load" in info.value.problems[0].suggestion
    assert docker_api.require_base(client, "rocm/pytorch:x", offline=False, arch="gfx942") is False
    assert docker_api.require_base(FakeClient({"b:1": FakeImage({})}), "b:1", offline=True, arch="cpu") is True


def test_no_daemon_says_how_to_start_one_or_use_local(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(["image-info", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "no Docker daemon reachable at unix:///nonexistent/docker.sock" in err
    assert "dockerd-up.sh" in err and "RUNTIME=local" in err


def test_image_info_lines():
    from rocmft.image.info import info_lines

    lines = "\n".join(info_lines(FakeImage({"ai.rocmft.arch": "cpu", "ai.rocmft.torch": "2.13.0",
                                            "org.opencontainers.image.base.name": "rocmft-base:cpu"})))
    assert "rocmft:cpu" in lines and "2.35 GB" in lines
    assert lines.index("arch") < lines.index("torch") and "rocmft-base:cpu" in lines


def test_a_file_sent_twice_or_hard_linked_is_sent_as_bytes_each_time(tmp_path):
    """The rehearsal's wheelhouse hard-links the cpu one, and the kernel stage's inputs are wheelhouse files too:
    tarfile would make the second entry a hard link to the first, and `COPY kernels/` would then miss it."""
    import os

    other = tmp_path / "cpu"
    other.mkdir()
    (other / "setuptools-84.2.1-py3-none-any.whl").write_bytes(b"wheel bytes")
    folder = tmp_path / "wheels"
    folder.mkdir()
    os.link(other / "setuptools-84.2.1-py3-none-any.whl", folder / "setuptools-84.2.1-py3-none-any.whl")
    plan = build_plan(arches.table()["gfx1100"], VERSIONS, "c", offline=True, wheelhouse=str(folder),
                      context=str(ROOT), kernel_sources=(str(folder / "setuptools-84.2.1-py3-none-any.whl"),))
    with tarfile.open(fileobj=context.write(plan)) as tar:
        entries = {m.name: m for m in tar.getmembers() if m.name.endswith("setuptools-84.2.1-py3-none-any.whl")}
        assert set(entries) == {"wheelhouse/gfx1100/setuptools-84.2.1-py3-none-any.whl",
                                "kernels/setuptools-84.2.1-py3-none-any.whl"}
        for member in entries.values():
            assert member.isreg() and tar.extractfile(member).read() == b"wheel bytes"
