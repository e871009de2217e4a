"""What a process inside a rocmft container can do, on a real Docker daemon with the CPU image (issue 26).

- The container a training run gets (`container_spec`, as `make train RUNTIME=docker` builds it) cannot write
  the checkout (Makefile, .git, src/, .venv), and can write its run dir's job folder (output/), as the
  invoking user.
- Issue 32: it cannot plant a link where the host writes next (status.json, its temp name, train.log): the run
  dir above output/ is read-only in there; what it plants in output/ is not followed by the host.
- GPU containers keep Docker's default seccomp profile with CAP_SYS_NICE: the NUMA memory-policy calls ROCr
  makes go through, and the profile still refuses them to a container without it (so it is on, not
  `unconfined`). No GPU here: the GPU spec's security settings are applied to a CPU-image container.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rocmft import pipeline
from rocmft.hardware import arches, host
from rocmft.launch import docker as rt
from rocmft.run import runs
from tests.conftest import ROOT
from tests.docker.test_container_train import TEST_UID, client, cpu_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker
A = arches.table()

PROBE = r"""
import json, os, sys
root, run_dir = sys.argv[1], sys.argv[2]
result = {}
for rel in ("Makefile", ".git", ".git/config", "src/rocmft/__init__.py", ".venv/bin/python", "planted.py"):
    path = os.path.join(root, rel)
    if rel != "planted.py" and not os.path.exists(path):
        continue
    try:
        if os.path.isdir(path):
            open(os.path.join(path, "planted"), "w").close()
        else:
            open(path, "a").close()
        result[rel] = "written"
    except OSError as exc:
        result[rel] = exc.strerror
open(os.path.join(run_dir, "output", "probe.txt"), "w").write("from inside\n")
print(json.dumps(result))
"""


def run_probe(client, spec, command) -> tuple[int, str]:  # noqa: F811
    """The spec's container (devices, mounts, user, capabilities) running `command` instead."""
    import dataclasses

    run_probe.count = getattr(run_probe, "count", 0) + 1
    probe = dataclasses.replace(spec, command=tuple(command), name=f"rocmft-probe-{os.getpid()}-{run_probe.count}")
    container = client.containers.create(**rt.sdk_kwargs(probe, {}))
    try:
        container.start()
        code = container.wait(timeout=120)["StatusCode"]
        return code, container.logs().decode()
    finally:
        container.remove(force=True)


def training_spec(tmp_path, monkeypatch, as_uid: int | None = None):
    """The spec `make train RUNTIME=docker` builds for the invoking user, or (`as_uid`, run as root) for a
    launch by that user, whose run dir it owns."""
    import dataclasses

    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = pipeline.prepare("tiny-cpu", [], run_name="probe", validate=False, env={})
    plan = pipeline.build_plan(prep, python="python", env={})
    facts = host.gather(tools=False)
    if as_uid is not None:
        facts = dataclasses.replace(facts, uid=as_uid, gid=as_uid)
    spec = rt.container_spec(plan, A["cpu"], facts, image="rocmft:cpu")
    runs.create(prep.run_dir)
    if as_uid is not None:  # the run dir and its job folder, as a launch by that user makes them
        for path in (prep.run_dir, *prep.run_dir.rglob("*")):
            os.chown(path, as_uid, as_uid)
    assert not rt.check_mounts(spec) and not rt.create_cache_dirs(spec)
    return spec, prep.run_dir


def test_a_training_container_cannot_write_the_checkout_and_writes_its_run_dir(client, cpu_image, tmp_path,  # noqa: F811
                                                                                  monkeypatch):
    spec, run_dir = training_spec(tmp_path, monkeypatch)
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "Makefile", ROOT / "src" / "rocmft" / "__init__.py")}
    code, out = run_probe(client, spec, ["python", "-c", PROBE, str(ROOT), str(run_dir)])
    assert code == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result and all(v == "Read-only file system" for v in result.values()), result
    assert {"Makefile", "src/rocmft/__init__.py", "planted.py"} <= set(result)
    assert not (ROOT / "planted.py").exists()
    assert {p: p.stat().st_mtime_ns for p in before} == before
    probe = run_dir / "output" / "probe.txt"
    assert probe.read_text() == "from inside\n"
    assert (probe.stat().st_uid, probe.stat().st_gid) == (os.getuid(), os.getgid())  # the invoking user
    if os.getuid() == 0:  # root invoking proves nothing about the user: a launch by TEST_UID writes as TEST_UID
        user_spec, user_run = training_spec(tmp_path / "as-user", monkeypatch, as_uid=TEST_UID)
        code, out = run_probe(client, user_spec, ["python", "-c", f"open({str(user_run / 'output' / 'probe.txt')!r}, 'w')"])
        assert code == 0, out
        written = (user_run / "output" / "probe.txt").stat()
        assert user_spec.user == f"{TEST_UID}:{TEST_UID}" and (written.st_uid, written.st_gid) == (TEST_UID, TEST_UID)


PLANT = r"""
run=$1; victim=$2
for name in status.json.tmp status.json train.log container.json; do
  ln -s "$victim" "$run/$name" 2>/dev/null && echo "planted $name" || echo "refused $name"
done
ln -s "$victim" "$run/output/progress.jsonl" && ln -s "$victim" "$run/output/diverged.json" && echo "planted output"
"""


def test_a_container_cannot_plant_a_link_where_the_host_writes(client, tmp_path, monkeypatch):  # noqa: F811
    """The container-side half of issue 32 item 2, in a real container with the training spec's mounts and
    user (the arch's base image: a shell is all the attack needs), then the real host code that ends a run."""
    from rocmft.launch import outcome
    from rocmft.run import events

    base = A["cpu"].base_image
    try:
        client.images.get(base)
    except Exception:  # noqa: BLE001
        pytest.fail(f"no {base} on the daemon: build it with scripts/ci/build-cpu-base.sh")
    import dataclasses

    spec, run_dir = training_spec(tmp_path, monkeypatch)
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text("alias ll='ls -l'\n")
    code, out = run_probe(client, dataclasses.replace(spec, image=base),
                          ["sh", "-c", PLANT, "plant", str(run_dir), str(victim)])
    assert code == 0, out
    assert out.split() == ["refused", "status.json.tmp", "refused", "status.json", "refused", "train.log",
                           "refused", "container.json", "planted", "output"], out
    runs.mark(run_dir, "running", runtime="docker")
    assert events.read(run_dir) == []  # the planted progress.jsonl link is not followed
    outcome.finish(run_dir, 0, "cpu")
    assert victim.read_text() == "alias ll='ls -l'\n"
    assert runs.read_status(run_dir)["state"] == "diverged"  # the job's word (its diverged.json), nothing more


CACHE_PLANT = r"""
host_ext=$1; hf=$2
mkdir -p "$TORCH_EXTENSIONS_DIR/evil" && echo planted > "$TORCH_EXTENSIONS_DIR/evil/evil.so" && echo "own $TORCH_EXTENSIONS_DIR"
(mkdir -p "$host_ext/evil" && echo planted > "$host_ext/evil/evil.so") 2>/dev/null
cat "$hf/token" 2>/dev/null && echo "token read" || echo "no token"
"""


def test_a_container_cache_plant_never_reaches_the_hosts_torch_extensions_or_token(client, tmp_path, monkeypatch):  # noqa: F811
    """Issue 32 item 3, in a real container with the training spec: what container code plants in its
    TORCH_EXTENSIONS_DIR lands in the image's own cache, not on the path host runs load extensions from, and
    HF_HOME's token file is not in there."""
    import dataclasses

    base = A["cpu"].base_image
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "token").write_text("hf_secret_of_the_host\n")
    monkeypatch.setenv("HF_HOME", str(hf))
    host_ext = tmp_path / "torch_extensions"  # the host's TORCH_EXTENSIONS_DIR (the Makefile exports one)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(host_ext))
    monkeypatch.setenv("ROCMFT_RUNS", str(tmp_path / "runs"))
    prep = pipeline.prepare("tiny-cpu", [], run_name="cache", validate=False, env={})
    plan = pipeline.build_plan(prep, python="python", env=dict(os.environ))
    spec = rt.container_spec(plan, A["cpu"], host.gather(tools=False), image=base)
    runs.create(prep.run_dir)
    assert not rt.check_mounts(spec) and not rt.create_cache_dirs(spec)
    code, out = run_probe(client, dataclasses.replace(spec, image=base),
                          ["sh", "-c", CACHE_PLANT, "plant", str(host_ext), str(hf)])
    assert code == 0, out
    own = spec.environment["TORCH_EXTENSIONS_DIR"]
    assert out.split() == ["own", own, "no", "token"], out
    assert (Path(own) / "evil" / "evil.so").is_file() and own.startswith(str(ROOT / ".cache" / "containers"))
    assert not host_ext.exists()  # nothing on the path a host run loads extensions from
    shutil.rmtree(Path(own) / "evil")


def _mempolicy_probe(client, spec):  # noqa: F811
    code, out = run_probe(client, spec, ["python", "-c", (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.syscall(239, None, None, 0, None, 0); "  # get_mempolicy on x86_64
        "print('get_mempolicy', r, os.strerror(ctypes.get_errno()) if r else 'ok')")])
    assert code == 0, out
    return out.strip().splitlines()[-1]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the syscall number used is x86_64's")
def test_gpu_containers_keep_dockers_seccomp_profile_with_the_numa_calls(client, cpu_image, tmp_path, monkeypatch):  # noqa: F811
    cpu, _ = training_spec(tmp_path, monkeypatch)
    assert cpu.cap_add == () and _mempolicy_probe(client, cpu) == "get_mempolicy -1 Operation not permitted"
    # the gfx942 spec's security settings (no devices: there is no GPU here)
    # micro-batch 1: tiny-cpu packs (neat), which flash-attn 2 on gfx942 takes one row at a time (rocmft.recipe.rules)
    gfx = rt.container_spec(pipeline.build_plan(pipeline.prepare("tiny-cpu", ["arch=gfx942", "per_device_train_batch_size=1"], run_name="gfx",
                                                                 validate=False, env={}), python="python", env={}),
                            A["gfx942"], host.gather(tools=False), image="rocmft:cpu")
    assert gfx.cap_add == ("SYS_NICE",) and gfx.ipc_mode == "host"
    import dataclasses

    numa = dataclasses.replace(cpu, cap_add=gfx.cap_add)
    assert _mempolicy_probe(client, numa) == "get_mempolicy 0 ok"
    assert "security_opt" not in rt.sdk_kwargs(numa, {})


# N1 (issue 43): a recipe's cache variable could name a cache root itself (`<checkout>/.cache`, HF_HOME), reach
# elsewhere through a link planted inside one, and an input could be ~/.cache (HF_HOME, the token included). Docker
# mounted each: the container read the Hub token and wrote where the host loads compiled code from. Each attack
# goes the whole way `make train RUNTIME=docker` goes (the recipe's mounts judged before validation, the
# container spec, its mount check), then, if nothing refused it, runs in a real container with that spec.
ROOT_PLANT = r"""
for token in "$@"; do cat "$token" 2>/dev/null && echo " <- token read"; done
for key in MIOPEN_USER_DB_PATH TRITON_CACHE_DIR; do
  eval dir=\$$key
  [ -n "$dir" ] && touch "$dir/rocmft-i43-planted" 2>/dev/null && echo "planted in $dir"
done
true
"""


@pytest.mark.parametrize("attack", ["the checkout's .cache", "HF_HOME", "a link in an image's cache root",
                                    "an input under ~/.cache"])
def test_a_recipe_never_mounts_a_cache_root_a_link_or_the_token(attack, client, tmp_path, monkeypatch):  # noqa: F811
    import dataclasses

    from rocmft.io.problems import ProblemReport

    home = tmp_path / "home"
    hf = home / ".cache" / "huggingface"  # the default HF_HOME, where `hf auth login` leaves the token
    hf.mkdir(parents=True)
    (hf / "token").write_text("hf_token_of_the_host")
    victim = tmp_path / "victim"
    victim.mkdir()
    # in another image's cache root (this container's own root is mounted whole: a link there is its own business)
    link = ROOT / ".cache" / "containers" / "i43-other-image" / f"link-{os.getpid()}"
    for name, value in (("HOME", str(home)), ("HF_HOME", str(hf)), ("ROCMFT_RUNS", str(tmp_path / "runs"))):
        monkeypatch.setenv(name, value)
    overrides = {"the checkout's .cache": [f"env.MIOPEN_USER_DB_PATH={ROOT / '.cache'}"],
                 "HF_HOME": [f"env.TRITON_CACHE_DIR={hf}"],
                 "a link in an image's cache root": [f"env.TRITON_CACHE_DIR={link}"],
                 "an input under ~/.cache": [f"model_name_or_path={hf}"]}[attack]
    if attack == "a link in an image's cache root":
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(victim)
    planted = [ROOT / ".cache" / "rocmft-i43-planted", hf / "rocmft-i43-planted", victim / "rocmft-i43-planted"]
    try:
        try:
            prep = pipeline.prepare("tiny-cpu", overrides, run_name="mounts", validate=False, env=dict(os.environ),
                                    mounted=lambda arch: True)
            plan = pipeline.build_plan(prep, python="python", env=dict(os.environ))
            spec = rt.container_spec(plan, A["cpu"], host.gather(tools=False), image=A["cpu"].base_image,
                                     args=prep.rendered.args)
            refused = rt.check_mounts(spec)
        except ProblemReport as report:
            refused = report.problems
        if not refused:  # the hole: what the container can do with these mounts
            runs.create(prep.run_dir)
            assert not rt.create_cache_dirs(spec)
            code, out = run_probe(client, dataclasses.replace(spec, image=A["cpu"].base_image),
                                  ["sh", "-c", ROOT_PLANT, "plant", str(hf / "token"), f"{hf}/token"])
            leaked = [p for p in planted if p.exists()]
            pytest.fail(f"{attack}: mounted; in the container: {out.strip()!r}; planted on the host: {leaked}")
        [line] = [p.line() for p in refused]
        why = {"the checkout's .cache": "it is a cache root or holds one", "HF_HOME": "outside the caches a job may write",
               "a link in an image's cache root": f"{link} is a symbolic link",
               "an input under ~/.cache": "is in ~/.cache, where HF_HOME keeps the Hub token"}[attack]
        assert "is not mounted into a job: " in line and why in line, line
        print(line)
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        if link.is_symlink():
            link.unlink()
            link.parent.rmdir()


BASHRC_PLANT = 'printf "%s\\n" "echo \\"\\$HF_TOKEN\\" > $1/bashrc-ran" >> "$HOME/.bashrc" && echo "planted in $HOME"'


def test_a_training_containers_home_never_reaches_the_next_make_shell(client, cpu_image, tmp_path, monkeypatch):  # noqa: F811
    """N11 (issue 43): every container shared one writable HOME (.cache/container-home), so what a training job's
    code wrote in its ~/.bashrc ran in the user's next `make shell`, with HF_TOKEN, writing the run dirs. The job
    plants it from a real training container; then the real `rocmft shell` runs an interactive bash."""
    import subprocess

    from tests.conftest import PYTHON, offline_env

    spec, run_dir = training_spec(tmp_path, monkeypatch)
    runs_dir = run_dir.parent
    code, out = run_probe(client, spec, ["sh", "-c", BASHRC_PLANT, "plant", str(runs_dir)])
    assert code == 0, out
    env = offline_env(tmp_path, ROCMFT_RUNS=str(runs_dir), HF_TOKEN="hf_token_for_the_shell")
    shell = subprocess.run([PYTHON, "-m", "rocmft.cli.main", "shell", "--arch", "cpu", "--", "bash", "-ic", "true"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    ran = runs_dir / "bashrc-ran"
    assert not ran.exists(), f"the training job's ~/.bashrc ran in make shell: {ran.read_text().strip()!r} ({out.strip()})"
