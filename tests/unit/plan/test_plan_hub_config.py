"""A model neither on disk nor in the table: its config.json read from the Hub (io/hubhttp), here a local HTTP
stand-in at HF_ENDPOINT, kept in .cache/hub-configs/ and read from there next time, offline too."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from rocmft.io.problems import ProblemReport
from rocmft.plan import models

REPO = "acme/Moe-2B-A1B"
CONFIG = {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
          "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
          "num_experts": 16, "num_experts_per_tok": 2, "vocab_size": 1000}


class _Hub(http.server.BaseHTTPRequestHandler):
    """Serves config.json of REPO as the Hub does (resolve/main, X-Repo-Commit); GatedRepo for `gated/`, 404 else."""
    seen: list = []

    def do_GET(self):
        _Hub.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == f"/{REPO}/resolve/main/config.json":
            body = json.dumps(CONFIG).encode()
            self.send_response(200)
            self.send_header("X-Repo-Commit", "0123abc")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        gated = self.path.startswith("/gated/")
        self.send_response(403 if gated else 404)
        self.send_header("X-Error-Code", "GatedRepo" if gated else "RepoNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The stand-in Hub, and a project root of the test's own (the kept configs go to its .cache/)."""
    for folder in ("recipes", "ds_configs"):
        (tmp_path / "project" / folder).mkdir(parents=True)
    monkeypatch.setenv("ROCMFT_ROOT", str(tmp_path / "project"))
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Hub.seen = []
    yield {"HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}", "HF_TOKEN": "hf_tok", "HF_HOME": str(tmp_path / "hf")}
    server.shutdown()
    server.server_close()


def test_config_is_read_from_the_hub_once_then_kept(hub, tmp_path):
    spec = models.resolve(REPO, env=hub)
    assert spec.experts.count == 16 and spec.source == f"{hub['HF_ENDPOINT']}/{REPO}/resolve/main/config.json (commit 0123abc)"
    assert _Hub.seen == [(f"/{REPO}/resolve/main/config.json", "Bearer hf_tok")]  # one small file, the token sent
    kept = tmp_path / "project" / ".cache" / "hub-configs" / "models--acme--Moe-2B-A1B"
    assert json.loads((kept / "config.json").read_text()) == CONFIG
    again = models.resolve(REPO, env={**hub, "HF_HUB_OFFLINE": "1"})  # offline: read from what was kept
    assert again.total_params == spec.total_params and "commit 0123abc" in again.source and str(kept) in again.source
    assert len(_Hub.seen) == 1


def test_offline_asks_nothing(hub):
    with pytest.raises(ProblemReport) as raised:
        models.resolve(REPO, env={**hub, "HF_HUB_OFFLINE": "1"})
    assert "HF_HUB_OFFLINE=1: its config.json is not read from the Hub" in str(raised.value)
    assert _Hub.seen == []


def test_a_gated_or_missing_repo_is_one_line_each(hub):
    with pytest.raises(ProblemReport) as raised:
        models.resolve("gated/Model-8B", env=hub)
    (problem,) = raised.value.problems
    assert "is gated on the Hub and the token from HF_TOKEN cannot read its config.json" in problem.message
    assert "accept its license" in problem.suggestion and "hf_tok" not in problem.line()
    with pytest.raises(ProblemReport) as raised:
        models.resolve("acme/Nothing-1B", env=hub)
    assert "is not a model repo on the Hub with a config.json" in str(raised.value)
    assert "plan: model:" in str(raised.value)  # and still how to plan it by hand


def test_an_unreachable_hub_is_an_error_not_a_traceback(tmp_path, monkeypatch):
    for folder in ("recipes", "ds_configs"):
        (tmp_path / folder).mkdir()
    monkeypatch.setenv("ROCMFT_ROOT", str(tmp_path))
    with pytest.raises(ProblemReport) as raised:
        models.resolve(REPO, env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path)})  # nothing listens
    assert "the Hub cannot be reached from here" in str(raised.value)


def test_a_hub_config_of_a_hybrid_is_refused_and_not_kept(hub, tmp_path):
    CONFIG_BACKUP = dict(CONFIG)
    CONFIG.update(model_type="qwen3_next", num_hidden_layers=8)
    try:
        with pytest.raises(ProblemReport, match="6 linear_attention, 2 full_attention"):
            models.resolve(REPO, env=hub)
    finally:
        CONFIG.clear()
        CONFIG.update(CONFIG_BACKUP)
    assert not (tmp_path / "project" / ".cache" / "hub-configs").exists()


def test_a_name_that_is_no_repo_id_is_never_sent(hub):
    """A value with a newline (an imported config's injection attempt, tests/unit/importer/test_injection.py) or a
    character the Hub refuses in ids: one line, no request."""
    for name in ("org/model\nenv:", "org/mo del", "org/model?x=1"):
        with pytest.raises(ProblemReport, match="is not a Hub repo id"):
            models.resolve(name, env=hub)
    assert _Hub.seen == []
