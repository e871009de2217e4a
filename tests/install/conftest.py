"""A machine set up like a user's: pip's configuration hidden, a fresh copy of the checkout, no venv.

`stock_env` drops every PIP_*/UV_* variable and points PIP_CONFIG_FILE at /dev/null (pip then reads no
configuration file at all), so this workplace's wheel folder and local indexes are invisible, as they are
on a user's machine. `torch_index` serves the CPU torch wheel from a PEP 503 index on 127.0.0.1 that the
test starts: the stand-in for https://download.pytorch.org/whl/cpu, which this machine cannot reach.
"""

from __future__ import annotations

import functools
import glob
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import ROOT


def lock_pin(name: str) -> str:
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].split()[0]  # before its `--hash=...` options
    raise AssertionError(f"{name} is not pinned in requirements/lock.txt")


def stock_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "ROCMFT_")) and k not in ("PYTHONPATH",)}
    env.update(PIP_CONFIG_FILE=os.devnull, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", **extra)
    return env


def fresh_copy(dest: Path) -> Path:
    """The checkout as `git clone` would give it, but with this working tree's edits (tracked and new files)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _cpu_torch_wheel() -> Path | None:
    """This workplace's CPU torch wheel (in the folder its pip is configured with); users never have it."""
    version = lock_pin("torch")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [line.split("=", 1)[1].strip("'") for line in out.splitlines() if "find-links" in line]
    folders += os.environ.get("PIP_FIND_LINKS", "").split()
    for folder in folders:
        found = glob.glob(os.path.join(folder.removeprefix("file://"), f"torch-{version}+cpu-{tag}-*.whl"))
        if found:
            return Path(found[0])
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D401 - the index's access log is not the test's output
        pass


@pytest.fixture(scope="session")
def torch_index(tmp_path_factory):
    wheel = _cpu_torch_wheel()
    if wheel is None:
        pytest.fail("no CPU torch wheel in pip's find-links folders to serve (this workplace's machines have one)")
    root = tmp_path_factory.mktemp("torch-index")
    (root / "simple" / "torch").mkdir(parents=True)
    os.symlink(wheel, root / "simple" / "torch" / wheel.name)
    href = quote(wheel.name)  # the '+' of the local version must be escaped in a URL
    (root / "simple" / "index.html").write_text('<a href="torch/">torch</a>\n')
    (root / "simple" / "torch" / "index.html").write_text(f'<a href="{href}">{wheel.name}</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()
