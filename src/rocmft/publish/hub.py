"""`make push RUN= REPO=owner/name`: a run's adapter (or merged model) and its model card to the Hugging Face Hub.

Private unless PRIVATE=0: a repo is created private, and an existing repo that is public is not pushed into
without PRIVATE=0 (the push would publish the model). The token is read from the shell's HF_TOKEN (or
HUGGING_FACE_HUB_TOKEN) and handed to huggingface_hub in this process, never to a command line, a file or a log;
huggingface_hub's own stored login is not used. HF_ENDPOINT (huggingface_hub reads it) names the Hub the token goes
to; another than huggingface.co is said. DRY_RUN=1 prints the repo, its visibility and the files, contacting nothing.

Uploads go through huggingface_hub's create_commit: one commit, the files and README.md (the card) together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from ..io.problems import Problem, ProblemReport, raise_if_errors
from ..run.adapters import upstream_adapters
from .card import card
from .source import Published, unfinished

WHATS = ("adapter", "merged")
TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
DEFAULT_ENDPOINT = "https://huggingface.co"
# The Hub's repo names: letters, digits, `-`, `_`, `.`, at most 96 characters, no `--` or `..`, not ending in `.git`.
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
# What a repo of each kind holds: the weights, their config, the tokenizer and chat template, the loss plot.
TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
             "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", *TOKENIZER, "training_loss.png")
MODEL_FILES = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json", *TOKENIZER)


@dataclass(frozen=True)
class PushPlan:
    run: Published
    repo: str
    private: bool
    what: str
    files: tuple[tuple[str, Path], ...]  # (path in the repo, local file)
    card: str
    endpoint: str

    def lines(self, env: Mapping[str, str]) -> list[str]:
        """What DRY_RUN=1 prints: the repo, its visibility, where, the files; whether a token is there, never it."""
        token = next((n for n in TOKENS if env.get(n)), None)
        out = [f"  repo      {self.repo} ({'private' if self.private else 'PUBLIC'}) on {self.endpoint}",
               f"  what      the {self.what} of {self.run.run_path}",
               "  files"]
        out += [f"    {name}  ({_size(path.stat().st_size)})" for name, path in self.files]
        out.append(f"    README.md  ({_size(len(self.card.encode()))}, the model card below)")
        out.append(f"  token     {token} is exported (not shown)" if token else
                   "  token     none exported: a push would be refused (export HF_TOKEN in your shell)")
        return out


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def _collect(folder: Path, patterns: tuple[str, ...]) -> tuple[tuple[str, Path], ...]:
    found = [f for f in sorted(folder.iterdir()) if f.is_file() and not f.is_symlink()
             and any(fnmatch(f.name, p) for p in patterns)] if folder.is_dir() else []
    return tuple((f.name, f) for f in found)


def endpoint(env: Mapping[str, str]) -> str:
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def plan(run: Published, repo: str, what: str, private: bool, env: Mapping[str, str], dry_run: bool) -> PushPlan:
    """The push, or every problem at once: nothing is sent."""
    what = (what or "adapter").strip().lower()
    problems = unfinished(run)
    if not REPO.fullmatch(repo or "") or "--" in repo or ".." in repo or repo.endswith(".git"):
        problems.append(Problem("", "REPO", f"`{repo}` is not a Hub repo name", "owner/name, e.g. REPO=my-org/llama3-8b-support"))
    if what not in WHATS:
        problems.append(Problem("", "WHAT", f"unknown `{what}`", f"one of {', '.join(WHATS)}"))
    files: tuple[tuple[str, Path], ...] = ()
    if what == "adapter" and not run.lora:
        problems.append(Problem("", "WHAT", f"{run.run_path} is a {run.train.get('finetuning_type')} fine-tune: it has "
                                "no adapter", "WHAT=merged pushes its output/ (the full model)"))
    elif what == "adapter" and upstream_adapters(run.train):
        problems.append(Problem("", "WHAT", f"{run.run_path}'s adapter trained on top of "
                                f"{', '.join(upstream_adapters(run.train))}: alone it is not the model",
                                f"`make export RUN={run.run_path}`, then WHAT=merged"))
    elif what == "adapter":
        files = _collect(run.run_dir / "output", ADAPTER_FILES)
        if not any(name == "adapter_model.safetensors" for name, _ in files) and not problems:
            problems.append(Problem("", "RUN", f"{run.run_path}/output has no adapter_model.safetensors", "see `make runs`"))
    elif what == "merged":
        files = _collect(run.model_dir, MODEL_FILES)
        if not run.has_model and not problems:
            problems.append(Problem("", "WHAT", f"{run.run_path} has no merged model", f"`make export RUN={run.run_path}` first"))
    if not dry_run:
        if not any(env.get(n) for n in TOKENS):
            problems.append(Problem("", "HF_TOKEN", "not exported: the Hub needs a token with write access to push",
                                    "export HF_TOKEN=... in your shell (never on make's command line); DRY_RUN=1 needs none"))
        if str(env.get("HF_HUB_OFFLINE", "")).lower() in ("1", "on", "yes", "true"):
            problems.append(Problem("", "HF_HUB_OFFLINE", "is set: huggingface_hub sends nothing while it is",
                                    "unset HF_HUB_OFFLINE for the push"))
    raise_if_errors(problems)
    return PushPlan(run, repo, private, what, files, card(run, what), endpoint(env))


def push(p: PushPlan, env: Mapping[str, str]) -> str:
    """Create the repo (private unless asked) and commit the files and the card; the commit's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    token = next(env[n] for n in TOKENS if env.get(n))
    api = HfApi(endpoint=p.endpoint, token=token, library_name="rocmft")
    api.create_repo(p.repo, private=p.private, exist_ok=True)
    if p.private and not api.repo_info(p.repo).private:
        raise ProblemReport([Problem("", "REPO", f"{p.repo} exists and is public: pushing into it would publish "
                                     "this model", "PRIVATE=0 to push into it anyway, or another REPO")])
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path)) for name, path in p.files]
    operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=p.card.encode()))
    info = api.create_commit(p.repo, operations=operations,
                             commit_message=f"rocmft: the {p.what} of {p.run.run_dir.name}")
    return str(info.commit_url)
