"""serve/api.py on a real FastAPI app: FastAPI's documentation routes (/docs, /redoc, /openapi.json and the
OAuth2 redirect), which answer without any key, are gone (404); the app's own routes answer as before. The
real server (LLaMA-Factory's app on the tiny run) is asked the same by tests/train/test_chat_serve.py."""

from __future__ import annotations

import os
import subprocess
import sys

from fastapi import FastAPI
from fastapi.testclient import TestClient

from rocmft.serve import api
from tests.conftest import ROOT

DOCS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")


def app_with_a_route() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models():
        return {"data": [{"id": "r1"}]}

    return app


def test_fastapi_serves_its_docs_without_a_key_and_the_wrapper_removes_them():
    before = TestClient(app_with_a_route())
    assert [before.get(path).status_code for path in DOCS] == [200, 200, 200, 200]  # the hole, as shipped
    after = TestClient(api.without_docs(app_with_a_route()))
    assert [after.get(path).status_code for path in DOCS] == [404, 404, 404, 404]
    assert after.get("/v1/models").json() == {"data": [{"id": "r1"}]}


def test_the_server_never_starts_without_a_key_of_16_characters():
    """LLaMA-Factory's create_app turns its key check off when API_KEY is empty: serve/api.py refuses first."""
    for key in (None, "", "x" * 15):
        env = {k: v for k, v in os.environ.items() if k != "API_KEY"}
        if key is not None:
            env["API_KEY"] = key
        proc = subprocess.run([sys.executable, "-m", "rocmft.serve.api", "--model_name_or_path", "nope"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "shorter than 16 characters: not serving without a key" in proc.stderr


def test_the_readiness_route_proves_the_one_time_secret_without_the_key():
    """What `make serve` asks before it says ready (serve/ports.proves_ready): a keyless route that answers a
    challenge with the proof of this server's one-time secret, and nothing without a secret or a challenge."""
    from rocmft.serve.plan import READY_PATH, ready_proof

    client = TestClient(api.with_readiness(app_with_a_route(), "s" * 43, "r1"))
    challenge = "c" * 32
    answer = client.get(READY_PATH, params={"challenge": challenge})
    assert answer.status_code == 200 and answer.json() == {"proof": ready_proof("s" * 43, challenge, "r1")}
    assert client.get(READY_PATH).status_code == 404  # no challenge
    assert TestClient(api.with_readiness(app_with_a_route(), "", "r1")).get(
        READY_PATH, params={"challenge": challenge}).status_code == 404  # no secret: no proof of anything
