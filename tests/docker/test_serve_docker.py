"""chat and serve with RUNTIME=docker for real: the session's tiny-cpu run (`trained_run`, trained in the venv)
served from the CPU image by a real Docker daemon, answering through the port published on 127.0.0.1.

Needs a daemon (DOCKER_HOST, e.g. from `eval "$(scripts/ci/dockerd-up.sh)"`) and the CPU image
(`make wheelhouse ARCH=cpu && make image ARCH=cpu OFFLINE=1`); skipped only when no daemon is configured.
"""

from __future__ import annotations

import signal
import subprocess
import time
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


def serve_containers(client):  # noqa: F811
    return client.containers.list(all=True, filters={"label": "ai.rocmft.serve"})


def test_make_serve_in_the_container_answers_through_the_published_port(client, env, run):  # noqa: F811
    import openai

    before = {c.id for c in serve_containers(client)}
    port = free_port()
    server = Server(["make", "-s", "serve", f"RUN={run}", f"PORT={port}", "RUNTIME=docker",
                     "SET=max_new_tokens=12 do_sample=false"], {**env, "API_KEY": KEY})
    server.wait_for("Ctrl-C stops it", timeout=300)
    ours = [c for c in serve_containers(client) if c.id not in before]
    assert len(ours) == 1
    container = ours[0]
    assert container.labels["ai.rocmft.serve"] == "api" and container.image.labels["ai.rocmft.arch"] == "cpu"
    bindings = container.attrs["HostConfig"]["PortBindings"][f"{port}/tcp"]
    assert bindings == [{"HostIp": "127.0.0.1", "HostPort": str(port)}]  # published on loopback only
    assert KEY not in str(container.attrs["Config"]["Cmd"]) and KEY not in "\n".join(server.lines)
    client_ = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    done = client_.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hello"}])
    assert done.choices[0].message.content.strip()
    stream = client_.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).strip()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0) \
            .chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}])
    started = time.monotonic()
    server.stop(signal.SIGTERM)
    assert_nothing_left(server, port)
    assert time.monotonic() - started < 30
    assert [c for c in serve_containers(client) if c.id not in before] == []  # stopped and removed


def test_make_chat_prompt_in_the_container(client, env, run):  # noqa: F811
    before = {c.id for c in serve_containers(client)}
    proc = subprocess.run(["make", "-s", "chat", f"RUN={run}", "PROMPT=hello", "RUNTIME=docker",
                           "SET=max_new_tokens=16 do_sample=false"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip() and "INFO" not in proc.stdout
    assert f"in container rocmft-ask-{run.name}-" in proc.stderr
    assert [c for c in serve_containers(client) if c.id not in before] == []


def test_a_missing_image_is_one_line_and_nothing_starts(client, env, run):  # noqa: F811
    before = {c.id for c in client.containers.list(all=True)}
    proc = rocmft("serve", str(run), "--runtime", "docker", "--image", "rocmft:no-such-image", "--port",
                  str(free_port()), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: image: image rocmft:no-such-image is not present locally (rocmft never pulls) "
                      "(build it: `make image ARCH=cpu OFFLINE=1` (no registry needed))"]
    assert {c.id for c in client.containers.list(all=True)} == before
