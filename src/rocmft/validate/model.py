"""Is the model there (or can the job get it) before a run dir or a container exists?

A `model_name_or_path` that is not a local dir is a Hub id, which LLaMA-Factory resolves when the job loads
the model: minutes into an 8-GPU job, or never (offline compute nodes, a gated model whose license the
token's account never accepted). Here, on the host, in this order:
  1. a local path: left to `inputs.check` (it reports a local dir without config.json);
  2. in the Hugging Face cache the job will use (`hubcache`): fine;
  3. HF_HUB_OFFLINE=1: the job cannot download it: one line saying how to fetch it;
  4. online: the Hub's own auth-check endpoint (what huggingface_hub.HfApi.auth_check calls:
     GET {endpoint}/api/models/{repo}/auth-check, answering GatedRepo / RepoNotFound in X-Error-Code;
     hf_api.py, utils/_http.py hf_raise_for_status) says whether the repo exists and the token can read it.
The request and the reading of its answer are pure (`auth_request`, `verdict`); `send` does the HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..io import hubcache, hubhttp
from ..io.problems import Problem, did_you_mean

endpoint = hubhttp.endpoint
token_source = hubhttp.token_source


@dataclass(frozen=True)
class HubRequest:
    url: str
    token_from: str  # where the token is read when sent: "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", a file, or ""
    timeout_s: float = hubhttp.TIMEOUT_S


@dataclass(frozen=True)
class HubAnswer:
    status: int
    error_code: str = ""  # X-Error-Code: GatedRepo, RepoNotFound, ...
    error_message: str = ""  # X-Error-Message


def auth_request(repo_id: str, env: Mapping[str, str]) -> HubRequest:
    return HubRequest(f"{endpoint(env)}/api/models/{repo_id}/auth-check", token_source(env))


def send(request: HubRequest, env: Mapping[str, str]) -> HubAnswer:
    """The HTTP call (io/hubhttp: the token never follows a redirect to another host). Raises OSError (URLError,
    timeout) when the Hub cannot be reached."""
    answer = hubhttp.get(request.url, request.token_from, env, timeout=request.timeout_s, agent="rocmft-model-check")
    return HubAnswer(answer.status, answer.error_code, answer.error_message)


def _fetch_hint(name: str) -> str:
    return f"`make fetch MODEL={name}` on a machine with internet and the same HF_HOME"


def verdict(repo_id: str, request: HubRequest, answer: HubAnswer | None, env: Mapping[str, str], *,
            file: str = "", key: str = "model_name_or_path", reason: str = "",
            known: tuple[str, ...] = ()) -> list[Problem]:
    """What the Hub's answer means for the job, as one line. `answer` None: the Hub was not reached (`reason`)."""
    page = f"{endpoint(env)}/{repo_id}"
    token = request.token_from
    if answer is None:  # the job, started from here, would not reach it either (compute nodes rarely reach more)
        return [Problem(file, key, f"model `{repo_id}` is not in the Hugging Face cache ({hubcache.hub_cache(env)}) "
                        f"and the Hub cannot be reached from here ({reason}) to download it",
                        f"{_fetch_hint(repo_id)}, then train with HF_HUB_OFFLINE=1")]
    if 200 <= answer.status < 300:
        return [Problem(file, key, f"model `{repo_id}` is not in the Hugging Face cache ({hubcache.hub_cache(env)}): "
                        "the job downloads it when it starts",
                        f"where the job's nodes have no internet, {_fetch_hint(repo_id)} first", severity="note")]
    if answer.error_code == "GatedRepo":
        if not token:
            return [Problem(file, key, f"model `{repo_id}` is gated on the Hub and no HF_TOKEN is set",
                            f"accept its license at {page}, then export HF_TOKEN=<a read token of that account>")]
        return [Problem(file, key, f"model `{repo_id}` is gated and the token from {token} cannot read it: its account "
                        "has not accepted the license (or the request is pending)", f"accept it at {page}")]
    if answer.status == 401 and token and "invalid" in answer.error_message.lower():
        return [Problem(file, key, f"the token from {token} is not a valid Hub token (asking about `{repo_id}`)",
                        f"make a read token at {endpoint(env)}/settings/tokens")]
    if answer.error_code == "RepoNotFound" or answer.status in (401, 404):
        private = "that the token from " + token + " can read" if token else "(a private repo needs HF_TOKEN)"
        hint = did_you_mean(repo_id, known)
        return [Problem(file, key, f"model `{repo_id}` is neither a local model dir, nor in the Hugging Face cache, "
                        f"nor a model repo on the Hub {private}",
                        f"{hint + '; ' if hint else ''}check the spelling, or give a local model dir")]
    if answer.status == 403:
        return [Problem(file, key, f"the Hub refuses the token from {token or '(none)'} for model `{repo_id}`"
                        + (f": {answer.error_message}" if answer.error_message else ""),
                        "a token with read access to it (fine-grained tokens list the repos they may read)")]
    return [Problem(file, key, f"the Hub answered HTTP {answer.status} about model `{repo_id}`: not checked; the job "
                    "downloads it when it starts", _fetch_hint(repo_id), severity="warning")]


def check(name: str, root: Path, env: Mapping[str, str] | None = None, *, file: str = "",
          key: str = "model_name_or_path", ask: Callable[[HubRequest, Mapping[str, str]], HubAnswer] = send,
          known: tuple[str, ...] = (), revision: str = "main") -> list[Problem]:
    """Problems with `model_name_or_path` that only the cache or the Hub can tell (see the module doc)."""
    from .inputs import is_local_path

    env = os.environ if env is None else env
    if not name or is_local_path(name, root):
        return []  # inputs.check: a local dir must hold a config.json
    if hubcache.cached_model(name, env, revision or "main") is not None:
        return []
    if not hubcache.looks_like_repo_id(name):
        return [Problem(file, key, f"model `{name}` is neither a local model dir (none at {root / name}) nor a Hub "
                        "repo id (org/name)", "give the model dir's path, or a Hub id such as Qwen/Qwen2.5-7B-Instruct")]
    if hubcache.offline(env):
        return [Problem(file, key, f"model `{name}` is neither a local model dir nor in the Hugging Face cache "
                        f"({hubcache.hub_cache(env)}), and HF_HUB_OFFLINE=1 keeps the job from downloading it",
                        f"{_fetch_hint(name)}, or point model_name_or_path at a local model dir")]
    request = auth_request(name, env)
    try:
        answer, reason = ask(request, env), ""
    except OSError as exc:
        answer, reason = None, str(getattr(exc, "reason", "") or exc) or type(exc).__name__
    return verdict(name, request, answer, env, file=file, key=key, reason=reason, known=known)
