"""The two install paths on a stock machine, for real (slow: `pytest -m install`).

One fresh copy, taken through a user's steps in order, each step's result recorded by a module fixture (so
the light host is built once, and each test reads its step whatever order the tests run in):
1. The light host: `make image ARCH=gfx942 DRY_RUN=1` and `make plan` install only the light dependencies:
   torch is not importable in the venv they made.
2. `make setup` with a TORCH_INDEX_URL that holds no CPU torch: one error line saying where it looked.
3. `make setup` with pip's configuration hidden and TORCH_INDEX_URL pointed at a local index: the CPU torch,
   no CUDA, no nvidia-* package, and the training stack imports; a second `make setup` does nothing.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.install.conftest import fresh_copy, stock_env

pytestmark = pytest.mark.install

CHECK_CPU_STACK = """
import importlib.metadata as md, torch, llamafactory, deepspeed, bitsandbytes
gpu = [d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia")]
print("cuda", torch.version.cuda, "hip", torch.version.hip, "nvidia", gpu, "torch", torch.__version__)
print("bitsandbytes", bitsandbytes.__version__)
"""


def make(clone, *args, env, timeout=1200) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout)


def probe(clone, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(clone / ".venv/bin/python"), "-c", code], capture_output=True, text=True)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return fresh_copy(tmp_path_factory.mktemp("stock") / "clone")


@pytest.fixture(scope="module")
def light_host(clone):
    """Step 1: what `make image DRY_RUN=1` and `make plan` printed, and which heavy imports the venv then had."""
    env = stock_env()
    image = make(clone, "image", "ARCH=gfx942", "DRY_RUN=1", env=env, timeout=300)
    plan = make(clone, "plan", "RECIPE=llama3-8b-z3", env=env, timeout=300)
    imports = {name: probe(clone, f"import {name}") for name in ("torch", "llamafactory", "deepspeed", "transformers")}
    return image, plan, imports


@pytest.fixture(scope="module")
def setup_without_cpu_torch(light_host, clone, tmp_path_factory):
    """Step 2: `make setup` pointed at an index with no CPU torch, and whether torch imported afterwards."""
    empty = tmp_path_factory.mktemp("no-wheels")
    proc = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=str(empty)), timeout=600)
    return empty, proc, probe(clone, "import torch")


@pytest.fixture(scope="module")
def setup_done(setup_without_cpu_torch, clone, torch_index):
    """Step 3: `make setup` from the local CPU torch index, the stack it installed, and a second `make setup`."""
    proc = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=torch_index))
    stack = probe(clone, CHECK_CPU_STACK)
    again = make(clone, "setup", env=stock_env(TORCH_INDEX_URL=torch_index), timeout=120)
    return proc, stack, again


def test_make_setup_takes_the_cpu_torch_from_the_torch_index_never_cuda(clone, setup_done, torch_index):
    proc, stack, again = setup_done
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert f"from TORCH_INDEX_URL={torch_index}" in out
    assert stack.returncode == 0, stack.stderr[-2000:]
    assert "cuda None hip None nvidia [] torch 2.13.0+cpu" in stack.stdout, stack.stdout
    assert "bitsandbytes 0.50.2" in stack.stdout, stack.stdout  # --no-deps beside the CPU torch (QLoRA on CPU)
    # What every rocmft process imports is compiled once, at setup, even where PYTHONDONTWRITEBYTECODE=1
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    for module in ("llamafactory/hparams/parser", "llamafactory/train/tuner", "deepspeed/runtime/config", "torch/__init__"):
        folder, name = (site / module).parent, (site / module).name
        assert list((folder / "__pycache__").glob(f"{name}.*.pyc")), f"no bytecode for {module}"
    # Idempotent: the second run installs nothing and says nothing.
    assert again.returncode == 0 and "==>" not in again.stdout, again.stdout


def test_make_setup_without_a_cpu_torch_says_where_it_looked_in_one_line(setup_without_cpu_torch):
    empty, proc, torch_import = setup_without_cpu_torch
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"TORCH_INDEX_URL={empty}" in errors[0] and "set TORCH_INDEX_URL" in errors[0]
    assert torch_import.returncode != 0


def test_light_host_builds_image_plans_and_plans_without_torch(light_host):
    image, plan, imports = light_host
    assert image.returncode == 0, (image.stdout + image.stderr)[-3000:]
    assert "rocm/pytorch" in image.stdout
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    assert "verdict:" in plan.stdout
    assert "No module named 'torch'" in imports["torch"].stderr
    for heavy in ("llamafactory", "deepspeed", "transformers"):
        assert imports[heavy].returncode != 0, heavy


def _planted_wheel(folder, name: str, version: str):
    """A wheel of a locked package, as a compromised index or mirror would serve it: valid, installable, not the
    file PyPI has (its module says so)."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    files = {f"{name}/__init__.py": b"PLANTED = True\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{name}-{version}.dist-info/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in {**files, f"{name}-{version}.dist-info/RECORD": record.encode()}.items():
            z.writestr(path, data)
    return wheel


def test_a_package_file_that_is_not_the_locked_one_is_never_installed(tmp_path):
    """L10 (issue 43): the lock held versions, no hashes, so whatever file an index served under a locked version
    was installed. An index on 127.0.0.1, first in uv's order (UV_EXTRA_INDEX_URL), serves a planted mdurl 0.1.2
    (a dependency of rich, in every light host); the light host is set up in a fresh copy, pip's configuration hidden."""
    import functools
    import http.server
    import threading

    from tests.install.conftest import _Quiet, lock_pin

    clone = fresh_copy(tmp_path / "clone")
    index = tmp_path / "index" / "simple"
    wheel = _planted_wheel(index / "mdurl", "mdurl", lock_pin("mdurl"))
    (index / "mdurl" / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(index.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = subprocess.run(["bash", "scripts/host-venv.sh"], cwd=clone, capture_output=True, text=True, timeout=900,
                              env=stock_env(UV_EXTRA_INDEX_URL=f"http://127.0.0.1:{server.server_address[1]}/simple"))
    finally:
        server.shutdown()
        server.server_close()
    planted = probe(clone, "import mdurl; print(getattr(mdurl, 'PLANTED', False))")
    assert planted.stdout.strip() != "True", f"the planted mdurl was installed (setup exit {proc.returncode})"
    assert proc.returncode != 0 and "mdurl" in proc.stderr and "hash" in proc.stderr.lower(), proc.stderr[-2000:]
