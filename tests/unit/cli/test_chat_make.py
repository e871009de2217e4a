"""The Make side of chat/serve/webui (the argv each target hands the CLI, through the recorder of conftest.py):
HOST and PROMPT count only from make's command line (zsh keeps HOST and PROMPT as shell variables), and a
prompt arrives byte for byte on the CLI's stdin, never in an argv."""

from __future__ import annotations


def test_serve_and_webui_pass_host_and_port_from_the_command_line(job_env, recorder):
    assert recorder.last("serve", "RUN=r", "HOST=0.0.0.0", "PORT=9001", "SET=temperature=0.1", env=job_env) == \
        ["serve", "r", "--set=temperature=0.1", "--port=9001", "--host=0.0.0.0"]
    assert recorder.last("webui", "ARCH=gfx942", "PORT=7000", "GPUS=0,1", env=job_env) == \
        ["webui", "--arch=gfx942", "--port=7000", "--gpus=0,1"]
    assert recorder.last("serve", "RUNTIME=docker", "IMAGE_REF=rocmft:mine", env=job_env) == \
        ["serve", "last", "--runtime=docker", "--image=rocmft:mine"]


def test_host_and_prompt_from_the_environment_are_ignored(job_env, recorder):
    env = {**job_env, "HOST": "mybox", "PROMPT": "%n@%m %~ %# "}
    assert recorder.last("chat", "RUN=r", env=env) == ["chat", "r"]
    assert recorder.last("serve", "RUN=r", env=env) == ["serve", "r"]


def test_a_prompt_arrives_as_typed_on_stdin_not_in_argv(job_env, recorder):
    prompt = "it's \"quoted\", $HOME\nand a second line\n\n"
    assert recorder.last("chat", "RUN=last", f"PROMPT={prompt}", env=job_env) == ["chat", "last", "--prompt-file=-"]
    assert recorder.calls()[-1]["stdin"] == prompt


def test_prompt_file_is_passed_and_stdin_reaches_the_cli(job_env, recorder):
    assert recorder.last("chat", "RUN=r", "PROMPT_FILE=my question.txt", env=job_env) == \
        ["chat", "r", "--prompt-file=my question.txt"]
    proc = recorder.make("chat", "PROMPT_FILE=-", env=job_env, input="from a pipe")
    assert proc.returncode == 0, proc.stderr
    assert recorder.calls()[-1]["argv"] == ["chat", "last", "--prompt-file=-"]
    assert recorder.calls()[-1]["stdin"] == "from a pipe"
