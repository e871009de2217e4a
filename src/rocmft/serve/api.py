"""`python -m rocmft.serve.api <LLaMA-Factory inference args>`: LLaMA-Factory's OpenAI-compatible API, every
route behind the key.

What `llamafactory-cli api` runs (llamafactory/api/app.py run_api: ChatModel, create_app, uvicorn), with one
change: create_app's FastAPI app keeps FastAPI's default documentation routes (/docs, /redoc, /openapi.json),
which answer without the key: anyone who reaches the port learns the server, its routes and its model. They
are removed here, so they answer 404; the API routes keep LLaMA-Factory's own key check (API_KEY, which the
launcher sets from ROCMFT_API_KEY for this process alone: cli/serve.py). Runs where the model runs (this venv,
or the arch's image with the checkout's src/ on PYTHONPATH, as serve/ask.py).
"""

from __future__ import annotations

import os
import sys

MIN_KEY_CHARS = 16  # the same floor as the launcher's (serve/plan.py)


def without_docs(app):
    """The FastAPI app without the routes FastAPI adds for its documentation (FastAPI.setup: openapi_url,
    docs_url and its OAuth2 redirect, redoc_url), and without the settings that would point at them."""
    paths = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url} - {None}
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in paths]
    app.openapi_url = app.docs_url = app.redoc_url = app.swagger_ui_oauth2_redirect_url = None
    return app


def with_readiness(app, secret: str, model: str):
    """The launcher's "are you ready?" (serve/ports.proves_ready): a fresh challenge in, the proof only the holder of
    this server's one-time secret can compute out. Keyless on purpose: the launcher never sends the key to whatever
    answers on the port (issue 43, N4); the proof tells nothing of the key or the model."""
    from fastapi.responses import JSONResponse

    from rocmft.serve.plan import READY_PATH, ready_proof

    def ready(challenge: str = ""):
        if not secret or not 16 <= len(challenge) <= 128:
            return JSONResponse({"detail": "not found"}, status_code=404)
        return {"proof": ready_proof(secret, challenge, model)}

    app.add_api_route(READY_PATH, ready, methods=["GET"], include_in_schema=False)
    return app


def main(argv: list[str] | None = None) -> int:
    # create_app turns the key check off when API_KEY is empty: never serve like that
    if len(os.environ.get("API_KEY", "")) < MIN_KEY_CHARS:
        print(f"[rocmft] API_KEY is missing or shorter than {MIN_KEY_CHARS} characters: not serving without a key "
              "(the launcher sets it from ROCMFT_API_KEY)", file=sys.stderr)
        return 2
    import uvicorn
    from llamafactory.api.app import create_app
    from llamafactory.chat import ChatModel

    from rocmft.serve.plan import READY_ENV

    app = without_docs(create_app(ChatModel(list(sys.argv[1:] if argv is None else argv))))
    app = with_readiness(app, os.environ.get(READY_ENV, ""), os.environ.get("API_MODEL_NAME", ""))
    uvicorn.run(app, host=os.environ.get("API_HOST", "127.0.0.1"), port=int(os.environ.get("API_PORT", "8000")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
