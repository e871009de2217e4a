"""Pure: what `make chat`, `make serve` and `make webui` run, as data (argv, environment, ports, URL).

LLaMA-Factory's own entry points do the work: `llamafactory-cli chat|webui` and its API app (through
serve/api.py, which removes FastAPI's keyless /docs and /openapi.json), which read their model arguments from
the command line (`--model_name_or_path ...`, HfArgumentParser) and their network settings from the
environment: `API_HOST`, `API_PORT`, `API_KEY`, `API_MODEL_NAME` (llamafactory/api/app.py) and
Gradio's `GRADIO_SERVER_NAME`, `GRADIO_SERVER_PORT` (llamafactory/webui/interface.py). No file is written:
a run dir stays what the run made.

The argv is runtime-neutral (`llamafactory-cli`, `python`): locally the venv's bin dir is put in front,
in a container the image's PATH finds them. Either way the server binds HOST itself (a container shares the
host's network: serve/docker.py), so it is reachable exactly where HOST says.

Who may use it (docs/security.md): the API always needs a key: the user's ROCMFT_API_KEY (16 characters at
least), else one generated for this server and printed once; LLaMA-Factory allows every CORS origin, so
without a key any web page open in the user's browser could use the model. The server reads API_KEY, which
rocmft sets for it alone from ROCMFT_API_KEY: a generic API_KEY exported for another service is never used.
LlamaBoard never opens a Gradio share link (an inherited
GRADIO_SHARE=1 included) and always asks for a password, on loopback too (serve/llamaboard.py): its "load
model" runs a model's remote code (trust_remote_code=True) and its Train tab runs any command line, so
whoever reaches it runs code as you; any local account can reach 127.0.0.1. It gets no credentials either
(`webui_environment`): HF_TOKEN, WANDB_API_KEY, API keys stay in your shell.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..io.problems import Problem
from ..run.target import Target

RUNTIMES = ("local", "docker")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
API_PORT = 8000  # LLaMA-Factory's default
PASSWORD_ENV = "ROCMFT_WEBUI_PASSWORD"  # LlamaBoard's password, on every address (user `rocmft`)
PASSWORD_MIN = 16  # an exported password shorter than this is refused; a generated one has 32 characters
WEBUI_USER = "rocmft"
# What a credential is called (the Makefile refuses the same names on its command line): never handed to
# LlamaBoard, whose page runs code for whoever reaches it.
CREDENTIAL = re.compile(r"(TOKEN|KEY|PASSWORD|PASSWD|SECRET|CREDENTIALS?)$|SECRET|^AWS_|^AZURE_|^GOOGLE_APPLICATION")
WEBUI_PORT = 7860  # Gradio's default
CLI = "llamafactory-cli"
KEY_ENV = "ROCMFT_API_KEY"  # the user's key for `make serve`; the server itself reads API_KEY
SERVER_KEY_ENV = "API_KEY"  # what LLaMA-Factory's API reads (llamafactory/api/app.py)
MIN_KEY_CHARS = 16  # shorter is guessable; a generated key has 32 (serve/api.py refuses shorter too)
# "Is it ready?" goes to whatever holds the port, which may be a program that took it while the model loads (issue
# 43, N4): never with the key. The launcher asks READY_PATH with a fresh challenge, and only the server it started,
# which holds this one-time secret (by name, as API_KEY), can answer its HMAC (`ready_proof`).
READY_ENV = "ROCMFT_READY_SECRET"
READY_PATH = "/rocmft/ready"


@dataclass(frozen=True)
class ServePlan:
    kind: str  # chat (interactive) | ask (one prompt) | api | webui
    runtime: str  # local | docker
    arch: str
    argv: tuple[str, ...]
    env: Mapping[str, str]  # never a secret
    secret_env: tuple[str, ...] = ()  # names; values come from the caller's environment at start
    host: str = ""  # host side of the bind
    port: int | None = None
    infer_args: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""  # API_MODEL_NAME / the container's name part

    @property
    def interactive(self) -> bool:
        return self.kind == "chat"

    @property
    def local_host(self) -> str:
        """Where a client on this machine connects."""
        if self.host in ("0.0.0.0", "", "::", "[::]"):
            return "127.0.0.1"
        return self.host

    @property
    def url(self) -> str:
        """The base URL: an OpenAI client's `base_url` for the API, the page for the web UI."""
        host = f"[{self.local_host}]" if ":" in self.local_host else self.local_host
        base = f"http://{host}:{self.port}"
        return f"{base}/v1" if self.kind == "api" else f"{base}/"

    @property
    def ready_url(self) -> str:
        """What answers once the model is loaded: the API's readiness proof (`ready_proof`), LlamaBoard's page."""
        return f"{self.url.removesuffix('/v1')}{READY_PATH}" if self.kind == "api" else self.url


def infer_args(target: Target, settings: Mapping[str, Any]) -> dict[str, Any]:
    """LLaMA-Factory's inference arguments for the run: what it loads from the run, then the settings."""
    args: dict[str, Any] = {"model_name_or_path": target.model}
    if target.adapter:
        args["adapter_name_or_path"] = target.adapter
        args["finetuning_type"] = "lora"
    args["template"] = target.template
    args["infer_backend"] = "huggingface"
    args.update(target.carried)
    args.update(settings)
    return args


def lf_argv(args: Mapping[str, Any]) -> list[str]:
    """`--key value` pairs as HfArgumentParser reads them (bools as true/false)."""
    argv: list[str] = []
    for key, value in args.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        argv += [f"--{key}", str(value)]
    return argv


def chat(target: Target, settings: Mapping[str, Any], runtime: str, prompt_file: str | None = None,
         base_too: bool = False, verbose: bool = False) -> ServePlan:
    """`prompt_file`: one answer to the prompt in that file (serve/private_file.py: a prompt in argv would be
    in every local user's `ps`); without it, the interactive chat (serve/repl.py: LLaMA-Factory's loop, its
    log kept off the terminal unless `verbose`, the end of input a clean exit)."""
    args = infer_args(target, settings)
    if prompt_file is None:
        argv = ("python", "-m", "rocmft.serve.repl", *(["--verbose"] if verbose else []), "--", *lf_argv(args))
        kind = "chat"
    else:
        # LLaMA-Factory's chat CLI is a REPL; one answer for a script comes from its ChatModel (ask.py).
        argv = ("python", "-m", "rocmft.serve.ask", f"--prompt-file={prompt_file}",
                *(["--base-too"] if base_too else []), "--", *lf_argv(args))
        kind = "ask"
    env = {"PYTHONUNBUFFERED": "1"}
    if runtime == "docker":
        # the mounted checkout's rocmft (the working directory's src/), not the copy baked into the image:
        # an image built before this command existed still answers
        env["PYTHONPATH"] = "src"
    return ServePlan(kind, runtime, target.arch, argv, env, infer_args=args, name=target.name)


def api(target: Target, settings: Mapping[str, Any], runtime: str, host: str, port: int,
        verbose: bool = False) -> ServePlan:
    """LLaMA-Factory's API app through serve/api.py. The key always goes by name (API_KEY, set by
    `api_key_env` from ROCMFT_API_KEY or a generated one), never in the plan. Each request's messages stay off
    the terminal and the log unless `verbose`: LLaMA-Factory prints them whole (api/chat.py) unless its
    API_VERBOSE is 0."""
    args = infer_args(target, settings)
    env = {"API_HOST": host, "API_PORT": str(port), "API_MODEL_NAME": target.name, "PYTHONUNBUFFERED": "1",
           "API_VERBOSE": "1" if verbose else "0"}
    if runtime == "docker":
        env["PYTHONPATH"] = "src"  # serve/api.py from the mounted checkout, as for `ask`
    return ServePlan("api", runtime, target.arch, ("python", "-m", "rocmft.serve.api", *lf_argv(args)), env,
                     (SERVER_KEY_ENV, READY_ENV), host, port, args, target.name)


def api_key_env(caller_env: Mapping[str, str]) -> tuple[dict[str, str], str | None, list[Problem]]:
    """(the server's environment: the caller's with API_KEY set from ROCMFT_API_KEY, the key generated for this
    server or None, problems). Whatever API_KEY the caller exported (another service's) is replaced: only
    rocmft's own variable becomes the server's key. A key shorter than MIN_KEY_CHARS is refused."""
    import secrets as random_secrets

    key = caller_env.get(KEY_ENV, "")
    problems: list[Problem] = []
    if key and len(key) < MIN_KEY_CHARS:
        problems.append(Problem("", KEY_ENV, f"the key is {len(key)} characters long: at least {MIN_KEY_CHARS}, or "
                                "it can be guessed", f"export {KEY_ENV}=$(openssl rand -hex 24), or unset it "
                                "for one generated per server"))
    elif caller_env.get(SERVER_KEY_ENV) and not key:
        problems.append(Problem("", SERVER_KEY_ENV, f"the {SERVER_KEY_ENV} in your environment is not used (it may "
                                f"be another service's): rocmft's key is {KEY_ENV}", f"export {KEY_ENV} to choose "
                                "one", severity="note"))
    generated = None if key else random_secrets.token_urlsafe(24)
    ready = random_secrets.token_urlsafe(32)
    return {**caller_env, SERVER_KEY_ENV: key or generated, READY_ENV: ready}, generated, problems


def ready_proof(secret: str, challenge: str, model: str) -> str:
    """What only the holder of this server's one-time secret can answer to a challenge (HMAC-SHA256 over the
    challenge and the served model's name)."""
    import hashlib
    import hmac

    return hmac.new(secret.encode(), f"{challenge}\n{model}".encode(), hashlib.sha256).hexdigest()


def webui(arch: str, runtime: str, host: str, port: int) -> ServePlan:
    """LlamaBoard through serve/llamaboard.py (LLaMA-Factory's own UI, launched without a share link), always
    behind a login: ROCMFT_WEBUI_PASSWORD, by name like API_KEY."""
    env = {
        "GRADIO_SERVER_NAME": host,
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_SHARE": "False",  # what Gradio itself reads; llamaboard.py also passes share=False
        "GRADIO_ANALYTICS_ENABLED": "False",  # no telemetry calls from a training box
        "PYTHONUNBUFFERED": "1",
    }
    secrets = (PASSWORD_ENV,)
    if runtime == "docker":
        env["PYTHONPATH"] = "src"  # llamaboard.py from the mounted checkout, as for `ask`
    return ServePlan("webui", runtime, arch, ("python", "-m", "rocmft.serve.llamaboard"), env, secrets, host, port,
                     {}, "llamaboard")


def with_secret(caller_env: Mapping[str, str], name: str) -> tuple[dict[str, str], str | None]:
    """(the caller's environment with NAME set, the value generated for it or None when the caller set it)."""
    import secrets as random_secrets

    if caller_env.get(name):
        return dict(caller_env), None
    value = random_secrets.token_urlsafe(24)
    return {**caller_env, name: value}, value


def webui_environment(caller_env: Mapping[str, str]) -> tuple[dict[str, str], str | None, list[Problem]]:
    """(the caller's environment without its credentials and with the LlamaBoard password, the password when
    generated here, problems). An exported password shorter than PASSWORD_MIN is refused."""
    env = {k: v for k, v in caller_env.items() if k == PASSWORD_ENV or not CREDENTIAL.search(k.upper())}
    given = caller_env.get(PASSWORD_ENV, "")
    if given and len(given) < PASSWORD_MIN:
        return env, None, [Problem("", PASSWORD_ENV, f"{len(given)} characters: LlamaBoard runs code for whoever "
                                   f"logs in, its password needs at least {PASSWORD_MIN}",
                                   f"unset {PASSWORD_ENV} to get a generated one")]
    env, generated = with_secret(env, PASSWORD_ENV)
    return env, generated, []


def choose_runtime(requested: str | None, trained: str, arch_is_gpu: bool) -> tuple[str, list[Problem]]:
    """RUNTIME= if given, else where the run trained; a Slurm/k8s run is tried on this host, in its arch's
    image for a GPU arch (the cluster's nodes are not where a person chats)."""
    if requested:
        if requested not in RUNTIMES:
            return "", [Problem("", "RUNTIME", f"`{requested}` cannot serve a model here", f"one of: {', '.join(RUNTIMES)}")]
        return requested, []
    if trained in RUNTIMES:
        return trained, []
    runtime = "docker" if arch_is_gpu else "local"
    notes = []
    if trained:
        notes.append(Problem("", "RUNTIME", f"the run trained on {trained}; chatting on this host with "
                             f"RUNTIME={runtime}", "RUNTIME=local|docker to choose", severity="note"))
    return runtime, notes


def parse_port(value: str | int | None, default: int) -> tuple[int, list[Problem]]:
    text = str(value).strip() if value is not None else ""
    if not text:
        return default, []
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        return default, [Problem("", "PORT", f"`{text}` is not a TCP port (1-65535)")]
    return int(text), []


def exposure(plan: ServePlan) -> list[Problem]:
    """Binding beyond this machine: say who can reach it, and what protects it."""
    if plan.host in LOOPBACK:
        return []
    if plan.kind == "api":
        return [Problem("", "HOST", f"listening on {plan.host}:{plan.port}: other machines can reach the API; "
                        "requests need the API key (a Bearer token), and the traffic is plain HTTP",
                        "put TLS in front (a reverse proxy) for anything beyond a trusted network", severity="note")]
    return [Problem("", "HOST", f"listening on {plan.host}:{plan.port}: other machines can reach LlamaBoard, "
                    f"behind a password ({PASSWORD_ENV}); whoever logs in runs code as you (a model's remote code, "
                    "any training command), over plain HTTP", "keep the default 127.0.0.1 and use an SSH tunnel (ssh -L)",
                    severity="warning")]


def curl_line(plan: ServePlan) -> str:
    """A line to paste: one chat completion from the running API (the key by variable, never its value)."""
    body = json.dumps({"model": plan.name, "messages": [{"role": "user", "content": "Hello!"}]})
    return (f"curl {plan.url}/chat/completions -H 'Content-Type: application/json' "
            f'-H "Authorization: Bearer ${KEY_ENV}" -d {shlex.quote(body)}')
