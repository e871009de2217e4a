"""What chat/serve/webui hand to LLaMA-Factory, as data: argv (its own argument names), environment (its
API_HOST/API_PORT/API_KEY/API_MODEL_NAME and Gradio's variables), URL, curl line, warnings."""

from __future__ import annotations

import pytest

from rocmft.run import target
from rocmft.serve import plan, settings
from tests.unit.run.conftest import make_run

KEY = "sk-test-SECRET-123"


def run_target(runs_dir, name="r1", **kw):
    return target.load(make_run(runs_dir, name, **kw))


def test_infer_args_come_from_the_run_then_the_settings(runs_dir):
    args = plan.infer_args(run_target(runs_dir), settings.parse("max_new_tokens=32"))
    assert args == {"model_name_or_path": "models/tiny-llama", "adapter_name_or_path": f"{runs_dir}/r1/output",
                    "finetuning_type": "lora", "template": "llama3", "infer_backend": "huggingface",
                    "flash_attn": "sdpa", "max_new_tokens": 32, "temperature": 0.7, "top_p": 0.9}
    merged = plan.infer_args(run_target(runs_dir, "m", merged=True), {})
    assert "adapter_name_or_path" not in merged and merged["model_name_or_path"] == f"{runs_dir}/m/merged"


def test_chat_is_llamafactorys_chat_loop_quiet_and_a_prompt_is_one_answer_from_its_chat_model(runs_dir):
    t = run_target(runs_dir)
    repl = plan.chat(t, {"do_sample": False}, "local")
    assert repl.kind == "chat" and repl.interactive
    assert repl.argv[:4] == ("python", "-m", "rocmft.serve.repl", "--")
    assert plan.chat(t, {}, "local", verbose=True).argv[:5] == ("python", "-m", "rocmft.serve.repl", "--verbose", "--")
    assert plan.chat(t, {}, "docker").env["PYTHONPATH"] == "src"  # the checkout's repl.py, whatever the image holds
    assert list(repl.argv[4:]) == ["--model_name_or_path", "models/tiny-llama", "--adapter_name_or_path",
                                   f"{runs_dir}/r1/output", "--finetuning_type", "lora", "--template", "llama3",
                                   "--infer_backend", "huggingface", "--flash_attn", "sdpa", "--do_sample", "false"]
    one = plan.chat(t, {}, "docker", prompt_file="/p/.cache/serve/in-x/text")
    assert one.argv[:5] == ("python", "-m", "rocmft.serve.ask", "--prompt-file=/p/.cache/serve/in-x/text", "--")
    assert not one.interactive
    assert one.env["PYTHONPATH"] == "src"  # the mounted checkout's ask.py, whatever the image holds
    assert "PYTHONPATH" not in plan.chat(t, {}, "local", prompt_file="f").env


def test_api_binds_the_asked_host_in_both_runtimes_and_always_takes_a_key_by_name(runs_dir):
    t = run_target(runs_dir)
    local = plan.api(t, {}, "local", "127.0.0.1", 8123)
    # LLaMA-Factory's own switch for printing each request's messages (api/chat.py): off unless VERBOSE=1
    assert local.env["API_VERBOSE"] == "0" and plan.api(t, {}, "local", "::1", 1, verbose=True).env["API_VERBOSE"] == "1"
    assert local.argv[:3] == ("python", "-m", "rocmft.serve.api")  # LLaMA-Factory's app without its keyless /docs
    assert local.argv[3:5] == ("--model_name_or_path", "models/tiny-llama")
    assert dict(local.env) == {"API_HOST": "127.0.0.1", "API_PORT": "8123", "API_MODEL_NAME": "r1", "PYTHONUNBUFFERED": "1",
                              "API_VERBOSE": "0"}
    assert local.url == "http://127.0.0.1:8123/v1" and local.ready_url == "http://127.0.0.1:8123/rocmft/ready"
    assert local.secret_env == ("API_KEY", "ROCMFT_READY_SECRET")  # the key, and the readiness proof's secret
    docker = plan.api(t, {}, "docker", "127.0.0.1", 8123)
    assert docker.env["API_HOST"] == "127.0.0.1" and docker.host == "127.0.0.1"  # the host's network (serve/docker.py)
    assert docker.env["PYTHONPATH"] == "src"  # the mounted checkout's serve/api.py, whatever the image holds


def test_a_key_is_generated_only_when_rocmft_api_key_is_not_exported():
    env, generated, problems = plan.api_key_env({"PATH": "/bin"})
    assert generated and env["API_KEY"] == generated and len(generated) >= 32 and problems == []
    assert plan.api_key_env({"PATH": "/bin"})[1] != generated  # a new one for each server
    env, generated, problems = plan.api_key_env({"ROCMFT_API_KEY": KEY})
    ready = env.pop("ROCMFT_READY_SECRET")  # one-time, for the readiness proof: never the key (issue 43, N4)
    assert (env, generated, problems) == ({"ROCMFT_API_KEY": KEY, "API_KEY": KEY}, None, [])
    assert len(ready) >= 32 and ready != KEY and plan.api_key_env({"ROCMFT_API_KEY": KEY})[0]["ROCMFT_READY_SECRET"] != ready


def test_a_generic_api_key_from_another_service_is_never_the_servers_key():
    env, generated, problems = plan.api_key_env({"API_KEY": "sk-another-services-key-000"})
    assert env["API_KEY"] == generated != "sk-another-services-key-000"
    assert [p.line() for p in problems] == ["note: API_KEY: the API_KEY in your environment is not used (it may be "
                                            "another service's): rocmft's key is ROCMFT_API_KEY (export "
                                            "ROCMFT_API_KEY to choose one)"]
    env, generated, problems = plan.api_key_env({"API_KEY": "sk-another-services-key-000", "ROCMFT_API_KEY": KEY})
    assert env["API_KEY"] == KEY and generated is None and problems == []


def test_a_short_key_is_refused():
    _, _, problems = plan.api_key_env({"ROCMFT_API_KEY": "x" * 15})
    assert [p.line() for p in problems] == ["error: ROCMFT_API_KEY: the key is 15 characters long: at least 16, or it "
                                            "can be guessed (export ROCMFT_API_KEY=$(openssl rand -hex 24), or unset "
                                            "it for one generated per server)"]
    assert plan.api_key_env({"ROCMFT_API_KEY": "x" * 16})[2] == []


def test_urls_and_curl_line(runs_dir):
    t = run_target(runs_dir)
    anywhere = plan.api(t, {}, "local", "0.0.0.0", 9000)
    assert anywhere.url == "http://127.0.0.1:9000/v1"
    assert plan.curl_line(anywhere) == ("curl http://127.0.0.1:9000/v1/chat/completions -H 'Content-Type: application/json' "
                                        "-H \"Authorization: Bearer $ROCMFT_API_KEY\" "
                                        "-d '{\"model\": \"r1\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}]}'")


def test_llamaboard_never_shares_and_asks_a_password_on_every_address():
    ui = plan.webui("cpu", "local", "::1", 7861)
    assert ui.url == "http://[::1]:7861/" and ui.argv == ("python", "-m", "rocmft.serve.llamaboard")
    assert dict(ui.env) == {"GRADIO_SERVER_NAME": "::1", "GRADIO_SERVER_PORT": "7861", "GRADIO_SHARE": "False",
                            "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    # loopback too: every local account reaches 127.0.0.1, and LlamaBoard runs code for whoever does (issue 32)
    assert ui.secret_env == ("ROCMFT_WEBUI_PASSWORD",)
    assert plan.webui("cpu", "local", "0.0.0.0", 7860).secret_env == ("ROCMFT_WEBUI_PASSWORD",)
    assert plan.webui("gfx942", "docker", "127.0.0.1", 7860).env["GRADIO_SERVER_NAME"] == "127.0.0.1"


def test_exposure_says_what_protects_a_server_beyond_loopback(runs_dir):
    t = run_target(runs_dir)
    assert plan.exposure(plan.api(t, {}, "local", "127.0.0.1", 8000)) == []
    keyed = plan.exposure(plan.api(t, {}, "local", "0.0.0.0", 8000))
    assert [p.severity for p in keyed] == ["note"] and "requests need the API key" in keyed[0].line()
    ui = plan.exposure(plan.webui("cpu", "local", "0.0.0.0", 7860))
    assert [p.severity for p in ui] == ["warning"] and "password (ROCMFT_WEBUI_PASSWORD)" in ui[0].line()
    assert "runs code as you" in ui[0].line()


def test_runtime_is_where_the_run_trained_unless_asked():
    assert plan.choose_runtime(None, "local", False) == ("local", [])
    assert plan.choose_runtime(None, "docker", True) == ("docker", [])
    runtime, notes = plan.choose_runtime(None, "slurm", True)
    assert runtime == "docker" and notes[0].severity == "note" and "trained on slurm" in notes[0].line()
    assert plan.choose_runtime("local", "docker", True) == ("local", [])
    runtime, problems = plan.choose_runtime("k8s", "docker", True)
    assert runtime == "" and problems[0].line() == "error: RUNTIME: `k8s` cannot serve a model here (one of: local, docker)"


def test_parse_port():
    assert plan.parse_port(None, 8000) == (8000, [])
    assert plan.parse_port("8123", 8000) == (8123, [])
    for bad in ("http", "0", "70000", "-1"):
        _, problems = plan.parse_port(bad, 8000)
        assert problems[0].line() == f"error: PORT: `{bad}` is not a TCP port (1-65535)"


@pytest.mark.parametrize("host,password", [("0.0.0.0", None), ("127.0.0.1", None), ("127.0.0.1", "short")])
def test_llamaboard_itself_refuses_to_start_without_a_long_password_on_any_address(host, password):
    """What runs in the job's runtime checks it again: no path starts LlamaBoard without a login."""
    import subprocess
    import sys

    env = {"GRADIO_SERVER_NAME": host, "PATH": "/usr/bin:/bin",
           **({"ROCMFT_WEBUI_PASSWORD": password} if password else {})}
    proc = subprocess.run([sys.executable, "-m", "rocmft.serve.llamaboard"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: ROCMFT_WEBUI_PASSWORD: LlamaBoard runs code for whoever reaches it and needs a password of at least "
        f"16 characters, on {host} too (`make webui` generates one)"]


def test_llamaboard_gets_no_credentials_and_a_password_of_its_own():
    caller = {"HF_TOKEN": "hf_x", "WANDB_API_KEY": "w", "API_KEY": "k", "AWS_SECRET_ACCESS_KEY": "a",
              "WEBUI_PASSWORD": "generic-password-of-another-tool", "GITHUB_TOKEN": "g", "PATH": "/usr/bin",
              "HF_HOME": "/data/hf", "TOKENIZERS_PARALLELISM": "false"}
    env, generated, problems = plan.webui_environment(caller)
    assert problems == [] and len(generated) >= 32 and env["ROCMFT_WEBUI_PASSWORD"] == generated
    assert set(env) == {"PATH", "HF_HOME", "TOKENIZERS_PARALLELISM", "ROCMFT_WEBUI_PASSWORD"}
    env, generated, problems = plan.webui_environment({**caller, "ROCMFT_WEBUI_PASSWORD": "x" * 16})
    assert generated is None and problems == [] and env["ROCMFT_WEBUI_PASSWORD"] == "x" * 16
    _, _, problems = plan.webui_environment({"ROCMFT_WEBUI_PASSWORD": "hunter2"})
    assert [p.line() for p in problems] == [
        "error: ROCMFT_WEBUI_PASSWORD: 7 characters: LlamaBoard runs code for whoever logs in, its password needs "
        "at least 16 (unset ROCMFT_WEBUI_PASSWORD to get a generated one)"]
