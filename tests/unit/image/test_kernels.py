"""The kernel stage, as data: its cache key (the Dockerfile's `kernels` stage and the context it is sent),
flash-attn's MAX_JOBS rule, the head dims, the host cache, the stage lines read from the daemon's output,
and `make image ARCH=gfx942 DRY_RUN=1`. The real rebuild is tests/docker/test_image.py."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rocmft.hardware import arches
from rocmft.hardware.versions import from_lock
from rocmft.image import build, build_plan, context, kernels
from rocmft.image.kernels import MaxJobs
from tests.unit.image.image_inputs import copy_image_inputs

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()
GIB = 1024 ** 3
# The only ARGs the kernel stage may declare: the kernel, the arch, the head dims, the build tools, and
# two options that do not change the wheel. Anything more would be a hidden input of its cache key.
KERNEL_ARGS = {"KERNEL_BACKEND", "FLASH_ATTN_VERSION", "GPU_ARCHS", "FLASH_ATTN_HEAD_DIMS", "BUILD_DEPS", "KERNEL_TOOLS",
               "MAX_JOBS", "OFFLINE"}


def stages(text: str) -> dict[str, list[str]]:
    """Dockerfile instructions (continuations joined, comments dropped) per stage name."""
    out: dict[str, list[str]] = {}
    current = None
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, flags=re.IGNORECASE)
        if match:
            current = match.group(1)
            out[current] = [line]
        elif current:
            out[current].append(line)
    return out


def test_kernel_stage_reads_only_the_base_and_its_own_folder():
    st = stages(DOCKERFILE)
    assert list(st)[:3] == ["base", "kernels", "deps"]
    # The base stage copies nothing: the kernel stage inherits no file of the project through it.
    assert not [i for i in st["base"] if i.split()[0] in ("COPY", "ADD")]
    kernel = st["kernels"]
    assert kernel[0].split()[1] == "base"
    copies = [i for i in kernel if i.split()[0] in ("COPY", "ADD")]
    assert copies == ["COPY kernels/ /kernels-in/"]
    assert not any("--from" in i for i in kernel)
    declared = {re.match(r"ARG ([A-Z_]+)", i).group(1) for i in kernel if i.startswith("ARG ")}
    assert declared == KERNEL_ARGS
    # The stages that read the project come after it, and take only its output.
    assert "COPY --from=kernels /kernels/wheels/ /kernels/" in st["deps"]
    assert all("lock.txt" not in i and "src/" not in i and "recipes" not in i for i in kernel)


def kernel_inputs(plan) -> tuple:
    """Everything the kernel stage's Docker cache key is made of, besides the base image."""
    args = {k: v for k, v in plan.buildargs.items() if k in KERNEL_ARGS}
    return args, context.kernel_members(plan), plan.kernel.key()


@pytest.fixture
def project(tmp_path):
    """A copy of the project parts the image reads, plus recipes/ and a stray kernels/ folder."""
    root = tmp_path / "proj"
    copy_image_inputs(root)
    for rel in ("src/rocmft/__init__.py", "recipes/a.yaml", "kernels/stray.whl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    return root


def test_kernel_cache_key_excludes_lock_src_and_recipes(project, tmp_path):
    arch = arches.table()["gfx942"]
    cache = tmp_path / "wheelhouse" / "gfx942"

    def plan(root: Path, commit: str):
        return build_plan(arch, from_lock(root / "requirements" / "lock.txt"), commit, offline=False,
                          context=str(root), max_jobs=MaxJobs(8, "x"), kernel_cache_root=str(cache))

    before = plan(project, "a" * 40)
    lock = project / "requirements" / "lock.txt"
    text = lock.read_text()
    bumped = re.sub(r"^deepspeed==\S+$", "deepspeed==0.99.0", text, flags=re.MULTILINE)
    bumped = re.sub(r"^peft==\S+$", "peft==9.9.9", bumped, flags=re.MULTILINE)
    assert bumped != text
    lock.write_text(bumped)
    (project / "src" / "rocmft" / "__init__.py").write_text("changed")
    (project / "recipes" / "a.yaml").write_text("changed")
    after = plan(project, "b" * 40)
    # The image as a whole did change (a pin and the commit)...
    assert after.buildargs["DEEPSPEED_VERSION"] != before.buildargs["DEEPSPEED_VERSION"]
    # ...its kernel stage did not: same args, same kernels/ folder, same host-cache key.
    assert kernel_inputs(after) == kernel_inputs(before)
    names = [name for name, _ in context.members(after)]
    # the stray folder is never sent; a CK compile gets the probe it runs first (rocmft.image.kernel_probe)
    assert [n for n in names if n.startswith("kernels")] == ["kernels", "kernels/kernel_probe.py"]
    # And the key does move with what the wheel depends on (so the check above could fail).
    for changed in (dict(head_dims="all"), dict(base_id="sha256:other")):
        other = build_plan(arch, from_lock(), "a" * 40, offline=False, max_jobs=MaxJobs(8, "x"), **changed)
        assert other.kernel.key() != before.kernel.key()
    gfx950 = build_plan(arches.table()["gfx950"], from_lock(), "a", offline=False, max_jobs=MaxJobs(8, "x"))
    assert gfx950.kernel.key() != before.kernel.key() and gfx950.buildargs["GPU_ARCHS"] == "gfx950"


def test_max_jobs_follows_flash_attn_rule():
    # flash-attn 2.8.3 setup.py: min(cpu_count // 2, free GiB / 9), at least 1.
    assert kernels.max_jobs(384, 2000 * GIB).value == 192  # a 2-socket MI300X host: cores decide
    small = kernels.max_jobs(64, 40 * GIB)
    assert small.value == 4 and "limited by memory" in small.why
    assert kernels.max_jobs(2, 3 * GIB).value == 1
    assert kernels.max_jobs(2, 3 * GIB, override=16) == MaxJobs(16, "MAX_JOBS set by you")


def test_head_dims_come_from_the_model_table():
    assert kernels.model_head_dims() == (64, 128)
    dims, why = kernels.head_dims_for_build("")
    assert dims == (64, 128) and "model table" in why
    assert kernels.head_dims_for_build("all")[0] == kernels.ALL_HEAD_DIMS
    with pytest.raises(ValueError):
        kernels.head_dims_for_build("80")
    half = kernels.spec_for(arches.table()["gfx942"], from_lock(), "ck", (64, 128))
    full = kernels.spec_for(arches.table()["gfx942"], from_lock(), "ck", kernels.ALL_HEAD_DIMS)
    assert kernels.sources_estimate(full) == kernels.CK_SOURCES_ALL_DIMS
    assert kernels.sources_estimate(half) < kernels.sources_estimate(full)
    # 64,128 uses its count from benchmarks/ck_kernel_count.py; a subset nobody counted scales the full count.
    assert kernels.sources_estimate(half) == kernels.CK_SOURCES_MEASURED[(64, 128)]
    one = kernels.spec_for(arches.table()["gfx942"], from_lock(), "ck", (128,))
    assert kernels.sources_estimate(one) == round(kernels.CK_SOURCES_ALL_DIMS / 4)
    # PR #82's own point: 636 s at MAX_JOBS=128 for every head dim.
    assert round(kernels.seconds_estimate(full, 128)) == 636
    # Away from that point the estimate is the model the comment states (job-seconds per source over MAX_JOBS,
    # perfect scaling): half the jobs, twice the time; one job, 128 times; half the sources, half the time.
    assert kernels.seconds_estimate(full, 64) == pytest.approx(2 * 636)
    assert kernels.seconds_estimate(full, 1) == pytest.approx(128 * 636)
    assert kernels.seconds_estimate(half, 128) == pytest.approx(636 * 1390 / 2775)


def test_a_host_kept_wheel_is_sent_instead_of_compiling(tmp_path):
    arch, versions = arches.table()["gfx942"], from_lock()
    folder = tmp_path / "wheelhouse" / "gfx942"
    sdist = folder / "flash_attn-2.8.3.post2.tar.gz"
    folder.mkdir(parents=True)
    sdist.write_text("sdist")
    fresh = build_plan(arch, versions, "c", offline=True, wheelhouse=str(folder), kernel_cache_root=str(folder),
                       kernel_sources=(str(sdist),))
    assert [n for n, _ in context.kernel_members(fresh)] == ["kernels", "kernels/flash_attn-2.8.3.post2.tar.gz",
                                                             "kernels/kernel_probe.py"]
    wheel = Path(fresh.kernel_cache) / "flash_attn-2.8.3.post2-cp312-cp312-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_text("wheel")
    again = build_plan(arch, versions, "c", offline=True, wheelhouse=str(folder), kernel_cache_root=str(folder),
                       kernel_sources=(str(sdist),))
    assert again.kernel_wheels == (str(wheel),)
    assert [n for n, _ in context.kernel_members(again)] == ["kernels", f"kernels/{wheel.name}"]
    assert "reuses the host-kept wheel" in "\n".join(again.lines())
    # The kept wheel sits under the wheelhouse but is not one of its top-level wheels (the image's installs).
    assert wheel not in context.wheelhouse_files(again)
    # `make wheelhouse` names it (a copy of the folder carries it to an air-gapped host).
    from rocmft.image.wheelhouse import kept_kernel_wheels

    assert kept_kernel_wheels(folder) == [wheel]


def stream(*chunks):
    return [{"stream": c} for c in chunks]


def test_stage_lines_come_from_the_daemons_output():
    events = stream("Step 1/6 : FROM b AS base\n", " ---> 111111111111\n",
                    "Step 2/6 : FROM base AS kernels\n", " ---> 111111111111\n",
                    "Step 3/6 : COPY kernels/ /kernels-in/\n", " ---> Using cache\n", " ---> 222222222222\n",
                    "Step 4/6 : RUN build\n", " ---> Using cache\n", " ---> 333333333333\n",
                    "Step 5/6 : FROM base AS deps\n", " ---> 111111111111\n",
                    "Step 6/6 : RUN pip install\n", " ---> Running in abcdef\n", "done\n", " ---> 444444444444\n",
                    ) + [{"aux": {"ID": "sha256:444444444444"}}]
    out = io.StringIO()
    result = build.consume(events, build.StepDisplay(out), io.StringIO())
    assert [s.name for s in result.stages] == ["base", "kernels", "deps"]
    kernel = result.stage("kernels")
    assert kernel.cached and kernel.image_id == "333333333333" and (kernel.work_steps, kernel.work_cached) == (2, 2)
    assert not result.stage("deps").cached
    text = out.getvalue()
    assert re.search(r"==> stage kernels .*\(cached\)", text) and re.search(r"==> stage deps .*0 of 1 steps cached", text)


def test_make_image_gfx942_dry_run_shows_the_kernel_stage():
    env = {**os.environ, "MAX_JOBS": "", "HEAD_DIMS": ""}
    proc = subprocess.run(["make", "-s", "image", "ARCH=gfx942", "DRY_RUN=1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kernel stage `kernels`" in out and "never lock.txt, src/, recipes/" in out
    assert re.search(r"MAX_JOBS +\d+ +\(flash-attn's rule: min\(", out)
    assert re.search(r"head dims +64,128 ", out)
    assert re.search(r"~\d+ CK sources .* ~ \d", out)  # the estimate
    assert "FUSED_ADAM" not in out and "deepspeed ops  none" in out
    proc = subprocess.run(["make", "-s", "image", "ARCH=gfx942", "DRY_RUN=1", "MAX_JOBS=96", "HEAD_DIMS=all"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "MAX_JOBS     96  (MAX_JOBS set by you)" in proc.stdout and "head dims    32,64,128,256" in proc.stdout


def test_image_info_says_where_the_kernel_came_from():
    from rocmft.image.info import kernel_lines

    built = "\n".join(kernel_lines({"source": "built", "detail": "compiled in this build with MAX_JOBS=96", "backend": "ck",
                                    "version": "2.8.3.post2", "gpu_archs": "gfx942", "head_dims": "64,128",
                                    "max_jobs": "96", "seconds": 3725, "wheels": "flash_attn-2.8.3.post2-cp312.whl"}))
    assert "source     built: compiled in the image's build" in built and "stage took 1h 02m" in built
    assert "head dims 64,128, MAX_JOBS 96" in built and "flash_attn-2.8.3.post2-cp312.whl" in built
    host = "\n".join(kernel_lines({"source": "host", "detail": "wheel kept on the build host", "backend": "ck", "seconds": 1}))
    assert "source     host: a wheel kept on the build host" in host
    none = "\n".join(kernel_lines({"source": "none", "detail": "no compiled kernel for this arch", "backend": "none"}))
    assert "source     none: no compiled kernel for this arch" in none and "flash-attn" not in none
    assert "no record" in kernel_lines({})[0]
