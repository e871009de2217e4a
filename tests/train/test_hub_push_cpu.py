"""N3 (issue 43): a recipe publishes your fine-tune with your token. `push_to_hub: true` with `hub_private_repo:
false` in a recipe (or SET=, or an imported config) made the job create a public repo in the user's account
with the exported HF_TOKEN and start uploading. Performed for real: `make train` of such a recipe through the CLI,
the Hub a server on 127.0.0.1 that records what it is asked (the user's HF_ENDPOINT, as on a machine that reaches
the Hub) and refuses it, so the job stops at its first request instead of training. The rendered default and the
refusals as data: tests/unit/launch/test_job_trust.py."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.conftest import offline_env, rocmft

pytestmark = pytest.mark.train


class _Hub(http.server.BaseHTTPRequestHandler):
    asked: list[tuple[str, str, str]] = []  # (method path, Authorization, body)

    def _record(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        _Hub.asked.append((f"{self.command} {self.path}", self.headers.get("Authorization") or "", body))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = _record

    def log_message(self, *args):
        pass


def test_a_recipe_that_pushes_to_the_hub_is_refused_without_the_opt_in(tmp_path, tiny_model):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = offline_env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_TOKEN="hf_users_own",
                      NO_PROXY="127.0.0.1")
    for name in ("HF_HUB_OFFLINE", "PUSH_TO_HUB", "PRIVATE"):  # online, as a user reaching the Hub; no opt-in
        env.pop(name, None)
    try:
        proc = rocmft("train", "tiny-cpu", "--runtime", "local", "push_to_hub=true", "hub_private_repo=false",
                      "hub_model_id=leak", env=env, timeout=900)
    finally:
        server.shutdown()
        server.server_close()
    asked, _Hub.asked = list(_Hub.asked), []
    created = [(what, auth, body) for what, auth, body in asked if "repos/create" in what]
    assert not created, f"the job asked the Hub to create a repo with the user's token: {created}"
    assert not asked, asked
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert any("llamafactory.push_to_hub" in line and "PUSH_TO_HUB=1" in line for line in lines), lines
    assert any("llamafactory.hub_private_repo" in line and "PRIVATE=0" in line for line in lines), lines
