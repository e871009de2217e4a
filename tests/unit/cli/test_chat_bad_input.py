"""Bad input to chat/serve/webui through the real CLI: one line per problem, exit 2, nothing started
(no server, no container; the model is never loaded, so each case returns in about a second)."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import offline_env, rocmft
from tests.unit.run.conftest import make_run


@pytest.fixture
def env(tmp_path):
    # no daemon reachable: a case that got as far as Docker would say so instead of its own line
    return offline_env(tmp_path, DOCKER_HOST="unix:///nonexistent/docker.sock")


def assert_refused(proc, *expected):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert all(line.startswith(("error: ", "warning: ", "note: ")) for line in lines), lines
    for text in expected:
        assert any(text in line for line in lines), (text, lines)
    assert "[rocmft] loading" not in proc.stdout and "[rocmft] starting" not in proc.stdout
    return [line for line in lines if line.startswith("error: ")]


def test_unknown_run(env):
    errors = assert_refused(rocmft("chat", "nope", "--prompt=hi", env=env), "error: RUN: unknown run `nope`")
    assert len(errors) == 1


def test_no_run_yet(env):
    assert_refused(rocmft("serve", "last", env=env), "error: RUN: no training of yours in ")


def test_run_with_no_adapter(env, tmp_path):
    make_run(tmp_path / "runs", "broken", state="interrupted", adapter=False)
    errors = assert_refused(rocmft("chat", "broken", "--prompt=hi", env=env),
                            "has no adapter to load: the run ended interrupted before its first save")
    assert len(errors) == 1


def test_port_in_use(env, tmp_path):
    make_run(tmp_path / "runs", "ok")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        errors = assert_refused(rocmft("serve", "ok", "--port", str(port), env=env),
                                f"error: PORT: port {port} on 127.0.0.1 is in use by another program")
        assert len(errors) == 1
        webui = assert_refused(rocmft("webui", "--port", str(port), env=env), f"port {port} on 127.0.0.1 is in use")
        assert len(webui) == 1


def test_every_command_line_problem_at_once(env, tmp_path):
    make_run(tmp_path / "runs", "ok")
    errors = assert_refused(rocmft("serve", "ok", "--port", "http", "--set", "max_new_token=5 template=qwen",
                                   "--runtime", "slurm", env=env),
                            "SET: max_new_token", "SET: template", "RUNTIME: `slurm` cannot serve", "PORT: `http`")
    assert len(errors) == 4


def test_docker_without_a_daemon_is_one_line(env, tmp_path):
    make_run(tmp_path / "runs", "ok")
    errors = assert_refused(rocmft("chat", "ok", "--prompt=hi", "--runtime", "docker", env=env),
                            "error: DOCKER_HOST: cannot reach the Docker daemon")
    assert len(errors) == 1


def test_a_gpu_run_on_a_host_without_its_gpus(env, tmp_path):
    make_run(tmp_path / "runs", "mi300", arch="gfx942", runtime="docker")
    errors = assert_refused(rocmft("serve", "mi300", env=env), "error: ARCH: no AMD GPU found on this host")
    assert len(errors) == 1


def test_a_prompt_file_that_cannot_be_read_and_a_prompt_given_twice(env, tmp_path):
    make_run(tmp_path / "runs", "ok")
    errors = assert_refused(rocmft("chat", "nope", f"--prompt-file={tmp_path}/missing.txt", env=env),
                            f"error: PROMPT_FILE: cannot read `{tmp_path}/missing.txt`: No such file or directory",
                            "error: RUN: unknown run `nope`")  # every problem at once
    assert len(errors) == 2
    (tmp_path / "q.txt").write_text("hi")
    errors = assert_refused(rocmft("chat", "ok", "--prompt=hi", f"--prompt-file={tmp_path}/q.txt", env=env),
                            "error: PROMPT: a prompt given twice (PROMPT= and PROMPT_FILE=)")
    assert len(errors) == 1


def test_a_short_api_key_is_refused_in_one_line_and_nothing_starts(env, tmp_path):
    make_run(tmp_path / "runs", "ok")
    short = "abc123-short"  # 12 characters
    proc = rocmft("serve", "ok", "--port", "nope", env={**env, "ROCMFT_API_KEY": short})
    errors = assert_refused(proc, "error: ROCMFT_API_KEY: the key is 12 characters long: at least 16",
                            "error: PORT: `nope` is not a TCP port")  # with every other problem of the command line
    assert len(errors) == 2 and short not in proc.stderr
