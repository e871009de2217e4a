"""chat and serve with RUNTIME=docker for real: the session's tiny-cpu run (`trained_run`, trained in the venv)
served from the CPU image by a real Docker daemon, on the host's network, answering on 127.0.0.1 only.

Needs a daemon (DOCKER_HOST, e.g. from `eval "$(scripts/ci/dockerd-up.sh)"`) and the CPU image
(`make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1`); skipped only when no daemon is configured.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, TrainedRun, offline_env, rocmft
from tests.docker.test_container_train import client, cpu_image  # noqa: F401 - fixtures
from tests.train.test_chat_serve import Server, assert_nothing_left, free_port

pytestmark = pytest.mark.docker
KEY = "sk-docker-serve-SECRET-321"


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("serve-docker"))


@pytest.fixture(scope="module")
def run(trained_run: TrainedRun, client, cpu_image) -> Path:  # noqa: F811 - the fixtures imported above
    return trained_run.path


def serve_containers(client, run: Path) -> list:  # noqa: F811
    """Serve containers of this run (found by its mount: other people's tests share the daemon)."""
    return [c for c in client.containers.list(all=True, ignore_removed=True, filters={"label": "ai.rocmft.serve"})
            if any(str(m.get("Source", "")).startswith(str(run)) for m in c.attrs.get("Mounts") or [])]


@pytest.fixture
def removed_after(client, run):  # noqa: F811
    """Whatever the test's outcome, no serve container of this run outlives it."""
    yield
    for container in serve_containers(client, run):
        container.remove(force=True)


def bridge_gateway(client) -> str:  # noqa: F811
    """The host's address on Docker's default bridge. A daemon names it in the bridge's IPAM config only
    when docker0 already had it at start (20.10 on a fresh machine lists the subnet alone); otherwise
    the daemon gave docker0 the subnet's first host address."""
    import ipaddress

    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def bridge_probe(client, cpu_image, host: str, port: int) -> str:  # noqa: F811
    """From a second container on Docker's default bridge: `open` if host:port accepts a connection."""
    container = client.containers.run(
        cpu_image.id, ["python", "-c", ("import socket, sys\n"
                       "try:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close(); print('open')\n"
                       "except OSError as exc:\n print(type(exc).__name__)"), host, str(port)],
        name=f"rocmft-bridge-probe-{os.getpid()}-{port}", detach=True, network_mode="bridge")
    try:
        container.wait(timeout=60)
        return container.logs().decode().strip()
    finally:
        container.remove(force=True)


def test_make_serve_in_the_container_answers_on_loopback_only(client, cpu_image, env, run, process_mark,  # noqa: F811
                                                              removed_after):
    """The server binds 127.0.0.1 on the host's network: the openai client on this machine gets answers,
    and a second container on Docker's bridge reaches it nowhere (on a bridge, the server listened on
    0.0.0.0 at the container's 172.17.0.x, open to every container and every local user)."""
    import openai

    port = free_port()
    server = Server(["make", "-s", "serve", f"RUN={run}", f"PORT={port}", "RUNTIME=docker",
                     "SET=max_new_tokens=12 do_sample=false"], process_mark.env({**env, "ROCMFT_API_KEY": KEY}))
    server.wait_for("Ctrl-C stops it", timeout=300)
    ours = serve_containers(client, run)
    assert len(ours) == 1
    container = ours[0]
    assert container.labels["ai.rocmft.serve"] == "api" and container.image.labels["ai.rocmft.arch"] == "cpu"
    assert container.attrs["HostConfig"]["NetworkMode"] == "host" and not container.attrs["HostConfig"]["PortBindings"]
    mounts = {m["Destination"]: m["RW"] for m in container.attrs["Mounts"]}
    assert mounts[str(ROOT)] is False  # the checkout read-only
    assert container.attrs["HostConfig"]["IpcMode"] != "host" and not container.attrs["HostConfig"]["SecurityOpt"]
    assert KEY not in str(container.attrs["Config"]["Cmd"]) and KEY not in "\n".join(server.lines)
    client_ = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    done = client_.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hello"}])
    assert done.choices[0].message.content.strip()
    stream = client_.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).strip()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0) \
            .chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}])
    import urllib.error
    import urllib.request

    for path in ("/docs", "/openapi.json"):  # the checkout's serve/api.py in the image: FastAPI's keyless docs gone
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://127.0.0.1:{port}{path}", timeout=10)
        assert refused.value.code == 404, path
    # the attack: another container on the bridge, at the host's bridge address and at the server's own
    gateway = bridge_gateway(client)
    targets = [gateway] + [n["IPAddress"] for n in container.attrs["NetworkSettings"]["Networks"].values() if n["IPAddress"]]
    for address in targets:
        assert bridge_probe(client, cpu_image, address, port) != "open", f"reachable from the bridge at {address}"
    server.stop(signal.SIGTERM)
    assert_nothing_left(server, port)  # waits for it, generously: a hang fails, a slow machine does not
    assert serve_containers(client, run) == []  # stopped and removed by the launcher itself


def test_make_chat_prompt_in_the_container(client, env, run, removed_after):  # noqa: F811
    proc = subprocess.run(["make", "-s", "chat", f"RUN={run}", "PROMPT=hello", "RUNTIME=docker",
                           "SET=max_new_tokens=16 do_sample=false"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip() and "INFO" not in proc.stdout
    assert f"in container rocmft-ask-{run.name}-" in proc.stderr
    assert serve_containers(client, run) == []


def test_a_missing_image_is_one_line_and_nothing_starts(client, env, run):  # noqa: F811
    proc = rocmft("serve", str(run), "--runtime", "docker", "--image", "rocmft:no-such-image", "--port",
                  str(free_port()), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: image: image rocmft:no-such-image is not present locally (rocmft never pulls) "
                      "(build it: `make image ARCH=cpu OFFLINE=1` (no registry needed))"]
    # others' containers come and go meanwhile (ignore_removed: one may go between the list and its inspect)
    mounting_the_run = [c for c in client.containers.list(all=True, ignore_removed=True)
                        if any(str(m.get("Source", "")).startswith(str(run)) for m in c.attrs.get("Mounts") or [])]
    assert mounting_the_run == []


def test_a_container_that_ends_as_a_wait_times_out_keeps_its_own_exit_code(client, cpu_image):  # noqa: F811
    """The one-shot answer waits in 5 s slices; a container that ended just after a slice timed out was read as
    exit 1 (an answer printed, `chat FAILED (exit code 1)`: CI, once). After a timeout the code is the
    container's own, and None only while it still runs."""
    from rocmft.serve.docker import exit_code_if_ended

    name = f"rocmft-exit-code-{os.getpid()}"
    container = client.containers.run(cpu_image.id, ["python", "-c", "import sys, time; time.sleep(3); sys.exit(0)"],
                                      name=name, detach=True, network_mode="none")
    try:
        assert exit_code_if_ended(container) is None
        container.wait(timeout=60)
        assert exit_code_if_ended(container) == 0
    finally:
        container.remove(force=True)
    container = client.containers.run(cpu_image.id, ["python", "-c", "import sys; sys.exit(3)"], name=name,
                                      detach=True, network_mode="none")
    try:
        container.wait(timeout=60)
        assert exit_code_if_ended(container) == 3
    finally:
        container.remove(force=True)
    assert exit_code_if_ended(container) == 1  # removed: no code left to read
