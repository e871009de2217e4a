"""The Make side of chat/serve/webui (`make -n`: the command line each target hands the CLI, nothing run):
HOST and PROMPT count only from make's command line (zsh keeps HOST and PROMPT as shell variables), and a
prompt reaches the CLI through the environment, so its quotes survive."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT


def dry(*args, env_extra=None, job_env):
    env = {**job_env, **(env_extra or {})}
    out = subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if "/rocmft " in line][-1]


def test_serve_and_webui_pass_host_and_port_from_the_command_line(job_env):
    assert dry("serve", "RUN=r", "HOST=0.0.0.0", "PORT=9001", "SET=temperature=0.1", job_env=job_env) == \
        ".venv/bin/rocmft serve r --set 'temperature=0.1' --port 9001 --host 0.0.0.0   "
    assert dry("webui", "ARCH=gfx942", "PORT=7000", "GPUS=0,1", job_env=job_env).split() == \
        [".venv/bin/rocmft", "webui", "--arch", "gfx942", "--port", "7000", "--gpus", "0,1"]
    assert dry("serve", "RUNTIME=docker", "IMAGE_REF=rocmft:mine", job_env=job_env).split() == \
        [".venv/bin/rocmft", "serve", "last", "--set", "''", "--runtime", "docker", "--image", "rocmft:mine"]


def test_host_and_prompt_from_the_environment_are_ignored(job_env):
    line = dry("serve", "chat", "RUN=r", env_extra={"HOST": "mybox", "PROMPT": "%n@%m %~ %# "}, job_env=job_env)
    assert "--prompt" not in line and line.split()[:3] == [".venv/bin/rocmft", "chat", "r"]
    serve = dry("serve", "RUN=r", env_extra={"HOST": "mybox"}, job_env=job_env)
    assert "--host" not in serve


def test_a_prompt_goes_through_the_environment(job_env):
    line = dry("chat", "RUN=last", "PROMPT=it's \"quoted\"", job_env=job_env)
    assert line.split()[:4] == [".venv/bin/rocmft", "chat", "last", "--set"] and '--prompt="$PROMPT"' in line
