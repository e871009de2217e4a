"""`make push` (issue 46) against a local HTTP stand-in for the Hub (HF_ENDPOINT), through the real CLI and the real
huggingface_hub: a private repo unless asked, exactly the files DRY_RUN=1 lists, the token sent only to the
Hub and shown, written or passed nowhere else; bad input is one line, exit 2, and nothing sent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import rocmft
from tests.unit.publish.hub_standin import Serving
from tests.unit.publish.runs import make_run, snapshot

TOKEN = "hf_rocmftTestToken0123456789"


@pytest.fixture
def env(job_env):
    env = {k: v for k, v in job_env.items() if k not in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env["HF_TOKEN"] = TOKEN
    return env


def listed(dry_run_stdout: str) -> list[str]:
    """The files DRY_RUN=1 says it would send."""
    return re.findall(r"^    (\S+)  \(", dry_run_stdout, re.MULTILINE)


def test_dry_run_shows_a_private_repo_and_its_files_and_never_the_token(env, tmp_path):
    run = make_run(tmp_path / "runs")
    with Serving() as hub:
        proc = rocmft("push", str(run), "--repo", "my-org/tiny", "--dry-run", env={**env, "HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    assert hub.requests == []  # contacted nothing
    assert f"repo      my-org/tiny (private) on {hub.url}" in proc.stdout
    assert listed(proc.stdout) == ["adapter_config.json", "adapter_model.safetensors", "chat_template.jinja",
                                   "tokenizer.json", "tokenizer_config.json", "README.md"]
    assert "HF_TOKEN is exported (not shown)" in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr


def test_the_hub_receives_exactly_the_listed_files_privately_and_the_token_goes_nowhere_else(env, tmp_path):
    run = make_run(tmp_path / "runs")
    before = snapshot(tmp_path)
    with Serving() as hub:
        shown = rocmft("push", str(run), "--repo", "my-org/tiny", "--dry-run", env={**env, "HF_ENDPOINT": hub.url})
        proc = rocmft("push", str(run), "--repo", "my-org/tiny", env={**env, "HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    committed = hub.committed("my-org/tiny")
    assert sorted(committed) == sorted(listed(shown.stdout))
    for name, data in committed.items():
        if name != "README.md":
            assert data == (run / "output" / name).read_bytes(), name
    assert hub.repos == {"my-org/tiny": True}  # created private
    card = committed["README.md"].decode()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "peft" and front["datasets"] == ["my-org/support-chats"]
    assert "base_model" not in front  # models/tiny-llama is no Hub repo: named in the text only
    assert "| base model | `models/tiny-llama` |" in card and "| steps | 12 |" in card and "| final loss | 1.2500 |" in card
    # the token: in the Authorization header of requests to the stand-in, and nowhere else
    sent = [r for r in hub.requests if TOKEN in r.headers.get("authorization", "")]
    assert sent and all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in sent)
    assert not any(TOKEN.encode() in r.body or TOKEN in r.path for r in hub.requests)
    assert TOKEN not in proc.stdout + proc.stderr
    assert snapshot(tmp_path) == before  # nothing written into the run (or anywhere under the test's folder)
    # huggingface_hub's own files in HF_HOME (a stored login would be `token`, `stored_tokens`): none holds it
    home = Path(env["HF_HOME"])
    assert not [f for f in home.iterdir() if f.is_file() and TOKEN.encode() in f.read_bytes()]


def test_public_only_when_asked_and_never_into_an_existing_public_repo_by_default(env, tmp_path):
    run = make_run(tmp_path / "runs")
    with Serving() as hub:
        public = rocmft("push", str(run), "--repo", "my-org/open", "--public", env={**env, "HF_ENDPOINT": hub.url})
        assert public.returncode == 0, public.stderr
        again = rocmft("push", str(run), "--repo", "my-org/open", env={**env, "HF_ENDPOINT": hub.url})
        commits = [r for r in hub.requests if "/commit/" in r.path]
    assert hub.repos == {"my-org/open": False}
    assert again.returncode == 2 and "my-org/open exists and is public" in again.stderr and "PRIVATE=0" in again.stderr
    assert len(commits) == 1  # the second push sent no file


def test_merged_pushes_the_merged_model(env, tmp_path):
    run = make_run(tmp_path / "runs")
    with Serving() as hub:
        proc = rocmft("push", str(run), "--repo", "my-org/tiny-merged", "--what", "merged", env={**env, "HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    assert sorted(hub.committed("my-org/tiny-merged")) == ["README.md", "config.json", "model.safetensors", "tokenizer.json"]
    assert "library_name: transformers" in hub.committed("my-org/tiny-merged")["README.md"].decode()


@pytest.mark.parametrize("args, drop, says", [
    (("--repo", "tiny"), (), "error: REPO: `tiny` is not a Hub repo name"),
    (("--repo", "a/b/c"), (), "error: REPO: `a/b/c` is not a Hub repo name"),
    (("--repo", "my-org/tiny"), ("HF_TOKEN",), "error: HF_TOKEN: not exported"),
    (("--repo", "my-org/tiny", "--what", "weights"), (), "error: WHAT: unknown `weights`"),
])
def test_bad_input_is_one_line_and_nothing_is_sent(env, tmp_path, args, drop, says):
    run = make_run(tmp_path / "runs")
    with Serving() as hub:
        proc = rocmft("push", str(run), *args, env={**{k: v for k, v in env.items() if k not in drop}, "HF_ENDPOINT": hub.url})
    assert proc.returncode == 2, proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if not ln.startswith("[rocmft] note:")]
    assert line.startswith(says), line
    assert hub.requests == []


def test_an_unfinished_run_or_a_chained_adapter_is_refused(env, tmp_path):
    unfinished = make_run(tmp_path / "runs", "stopped", state="interrupted")
    chained = make_run(tmp_path / "runs", "dpo")
    train = yaml.safe_load((chained / "train.yaml").read_text())
    (chained / "train.yaml").write_text(yaml.safe_dump({**train, "create_new_adapter": True,
                                                        "adapter_name_or_path": "runs/sft/output"}))
    with Serving() as hub:
        stopped = rocmft("push", str(unfinished), "--repo", "o/n", env={**env, "HF_ENDPOINT": hub.url})
        dpo = rocmft("push", str(chained), "--repo", "o/n", env={**env, "HF_ENDPOINT": hub.url})
    assert stopped.returncode == 2 and f"{unfinished} did not finish (status: interrupted)" in stopped.stderr
    assert dpo.returncode == 2 and "adapter trained on top of runs/sft/output: alone it is not the model" in dpo.stderr
    assert hub.requests == []
