"""The host's one way to the Hugging Face Hub over HTTP: the endpoint, the token, one GET.

The host CLI has no huggingface_hub (the light host; the job's side downloads with it: rocmft.fetch.worker), so
the two small questions it asks the Hub go through here: whether a repo can be read (validate/model.py, the
auth-check endpoint) and a model's config.json (`config_json`, for the planner). As huggingface_hub does:
`HF_ENDPOINT` (default https://huggingface.co), the token from HF_TOKEN / HUGGING_FACE_HUB_TOKEN, else the file
`hf auth login` writes (utils/_auth.py get_token); `HF_HUB_OFFLINE=1` asks nothing (hubcache.offline).
A file is read as huggingface_hub's hf_hub_url builds its address: `{endpoint}/{repo}/resolve/{revision}/{file}`.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import hubcache

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 10.0  # one small answer; a host without a route to the Hub fails fast or times out here
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few kB; anything larger is not one


@dataclass(frozen=True)
class Answer:
    status: int
    error_code: str = ""  # X-Error-Code: GatedRepo, RepoNotFound, EntryNotFound, ...
    error_message: str = ""  # X-Error-Message
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


def endpoint(env: Mapping[str, str]) -> str:
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def token_source(env: Mapping[str, str]) -> str:
    """Where huggingface_hub.get_token would find a token (utils/_auth.py): the environment, then the file
    `hf auth login` writes. Only the name travels; the value is read when the request is sent."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if env.get(name, "").strip():
            return name
    file = Path(env.get("HF_TOKEN_PATH") or hubcache.hf_home(env) / "token").expanduser()
    return str(file) if file.is_file() else ""


def _token(source: str, env: Mapping[str, str]) -> str:
    if not source:
        return ""
    if source in env:
        return env[source].strip()
    try:
        return Path(source).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class _TokenStaysHome(urllib.request.HTTPRedirectHandler):
    """A redirect keeps the token only to the same scheme, host and port. urllib copies every header onto the
    redirected request, so an endpoint (or anything in the path to it) answering 302 to another host would
    be handed the user's Hub token. httpx, which the job's huggingface_hub uses, drops it the same way."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


def get(url: str, token_from: str, env: Mapping[str, str], *, timeout: float = TIMEOUT_S,
        limit: int = 0, agent: str = "rocmft") -> Answer:
    """One GET, with the token of `token_from` (see token_source). Raises OSError (URLError, timeout) when the
    Hub cannot be reached; an HTTP error is an Answer with the Hub's X-Error-Code. `limit` > 0 reads the body,
    at most that many bytes."""
    headers = {"User-Agent": agent}
    token = _token(token_from, env)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        opener = urllib.request.build_opener(_TokenStaysHome)
        with opener.open(urllib.request.Request(url=url, headers=headers), timeout=timeout) as response:
            body = response.read(limit + 1) if limit else b""
            return Answer(response.status, body=body, headers=dict(response.headers.items()))
    except urllib.error.HTTPError as err:
        return Answer(err.code, err.headers.get("X-Error-Code") or "", err.headers.get("X-Error-Message") or "")


def file_url(repo_id: str, filename: str, env: Mapping[str, str], revision: str = "main") -> str:
    """huggingface_hub's hf_hub_url: where the Hub serves one file of a model repo."""
    return f"{endpoint(env)}/{repo_id}/resolve/{urllib.parse.quote(revision, safe='')}/{filename}"


@dataclass(frozen=True)
class Config:
    """A model's config.json as the Hub served it, or why it did not."""
    data: dict | None
    url: str
    commit: str = ""  # X-Repo-Commit: the revision the file came from
    problem: str = ""  # one line when `data` is None
    fix: str = ""


# A Hub repo id as the Hub accepts one (huggingface_hub utils/_validators.py validate_repo_id: letters, digits,
# `-`, `_`, `.`, at most 96 characters a part): anything else is never sent.
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def config_json(repo_id: str, env: Mapping[str, str], revision: str = "main") -> Config:
    """The model's config.json from the Hub: one small file, never the weights."""
    url = file_url(repo_id, "config.json", env, revision)
    if not REPO_ID.fullmatch(repo_id) or ".." in repo_id:
        return Config(None, url, problem="is not a Hub repo id (org/name of letters, digits, - _ .)",
                      fix="check the spelling")
    token = token_source(env)
    try:
        answer = get(url, token, env, limit=MAX_CONFIG_BYTES, agent="rocmft-plan")
    except OSError as exc:
        reason = str(getattr(exc, "reason", "") or exc) or type(exc).__name__
        return Config(None, url, problem=f"the Hub cannot be reached from here ({reason}) to read its config.json",
                      fix="on a machine with internet `make fetch MODEL=" + repo_id + "`, or a local model dir")
    page = f"{endpoint(env)}/{repo_id}"
    if answer.status == 200:
        if len(answer.body) > MAX_CONFIG_BYTES:
            return Config(None, url, problem=f"{url} is over {MAX_CONFIG_BYTES >> 10} KiB: not a config.json")
        try:
            data = json.loads(answer.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return Config(None, url, problem=f"{url} is not JSON ({exc})")
        if not isinstance(data, dict):
            return Config(None, url, problem=f"{url} is not a JSON object")
        lower = {k.lower(): v for k, v in answer.headers.items()}
        return Config(data, url, commit=str(lower.get("x-repo-commit", "")))
    if answer.error_code == "GatedRepo" or (answer.status in (401, 403) and token):
        who = f"the token from {token}" if token else "no HF_TOKEN"
        return Config(None, url, problem=f"is gated on the Hub and {who} cannot read its config.json",
                      fix=f"accept its license at {page}, then export HF_TOKEN=<a read token of that account>")
    if answer.error_code in ("RepoNotFound", "EntryNotFound") or answer.status in (401, 404):
        return Config(None, url, problem="is not a model repo on the Hub with a config.json"
                      + ("" if token else " (a private repo needs HF_TOKEN)"), fix="check the spelling")
    return Config(None, url, problem=f"the Hub answered HTTP {answer.status} for its config.json")
