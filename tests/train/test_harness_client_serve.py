"""`make serve` tested with a client nobody here wrote: lm-evaluation-harness's own OpenAI-compatible client
(`lm_eval --model local-chat-completions`, the installed CLI) scores the demo's identity task against `make serve`
of the demo run, and its score matches the in-process score of `make eval TASKS=rocmft_demo` on the same run within
the harness's standard error (`pytest -m train`).

- The key reaches the client by environment (OPENAI_API_KEY, which the harness reads), never argv; the server log
  shows one `POST /v1/chat/completions` answered 200 per row the harness scored: the server was really used.
- The harness's client with a wrong key is refused (401): the key is enforced for this client too.

LLaMA-Factory's API has chat completions only, no logprobs: this client can score `generate_until` tasks
(rocmft_demo_identity), not multiple choice. The run is the session's `demo_run` (tests/conftest.py), read-only.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, TrainedRun, offline_env
from tests.train.test_chat_serve import Server, assert_nothing_left, free_port

pytestmark = pytest.mark.train
TASK = "rocmft_demo_identity"
METRIC = "exact_match"
LM_EVAL = str(Path(PYTHON).parent / "lm_eval")  # the harness's own CLI, installed by `make setup`


@dataclass(frozen=True)
class Score:
    value: float
    stderr: float
    n: int  # rows scored


def harness_results(output_path: Path, task: str, metric: str) -> Score:
    """The harness's results JSON (`--output_path`: <dir>/<model>/results_<time>.json), its `metric,none` filter."""
    [found] = list(output_path.rglob("results_*.json"))
    results = json.loads(found.read_text())
    row = results["results"][task]
    return Score(row[f"{metric},none"], row[f"{metric}_stderr,none"], results["n-samples"][task]["effective"])


def run_harness(args: list[str], env: dict[str, str], output_path: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([LM_EVAL, *args, "--include_path", str(ROOT / "eval_tasks"), "--tasks", TASK,
                           "--apply_chat_template", "--output_path", str(output_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def in_process_score(harness_evaluated_demo) -> Score:
    """The demo task as `make eval TASKS=rocmft_demo` scored it in-process (the session's harness_evaluated_demo:
    a copy of the same demo run, the tuned side), from the run's eval.json."""
    run, _, _ = harness_evaluated_demo
    rows = json.loads((run / "eval.json").read_text())["harness"]["rows"]
    row = next(r for r in rows if r["task"] == TASK and r["metric"] == METRIC)
    return Score(row["tuned"], row["tuned_stderr"], row["n"])


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("harness-client"))


def test_the_harness_openai_client_scores_make_serve_as_the_in_process_harness_does(env, demo_run: TrainedRun,
                                                                                    harness_evaluated_demo,
                                                                                    process_mark, tmp_path):
    run = demo_run.path
    key = secrets.token_hex(16)
    port = free_port()
    server = Server(["make", "-s", "serve", f"RUN={run}", f"PORT={port}", "SET=do_sample=false"],
                    process_mark.env({**env, "ROCMFT_API_KEY": key}))  # stopped at teardown whatever happens here
    server.wait_for("Ctrl-C stops it")
    base_url = f"http://127.0.0.1:{port}/v1/chat/completions"
    served_out = tmp_path / "served"
    proc = run_harness(["--model", "local-chat-completions", "--model_args",
                        f"base_url={base_url},model={run.name},tokenizer_backend=none,num_concurrent=1"],
                       {**env, "OPENAI_API_KEY": key}, served_out)
    assert key not in proc.stdout + proc.stderr
    served = harness_results(served_out, TASK, METRIC)

    refused = wrong_key_status(base_url, run.name, env)
    server.stop(signal.SIGTERM)
    assert_nothing_left(server, port)
    posts = [line for line in server.lines if '"POST /v1/chat/completions HTTP/1.1"' in line]
    assert sum(" 200" in line for line in posts) == served.n and served.n > 0, posts  # every row went to the server
    assert refused == 401 and sum(" 401" in line for line in posts) == 1, posts

    local = in_process_score(harness_evaluated_demo)
    assert served.n == local.n
    # the same task, model and greedy decoding: the two scores agree within the harness's standard error
    assert abs(served.value - local.value) <= max(served.stderr, local.stderr), (served, local)
    print(f"served {served}, in-process {local}")


# The harness's own client (the class `--model local-chat-completions` builds) sends one chat request and prints the
# HTTP status it got. In a process of its own: importing lm_eval sets HF_* variables in os.environ.
WRONG_KEY_PROBE = r"""
import json, sys
import requests
from lm_eval.models.api_models import JsonChatStr
from lm_eval.models.openai_completions import LocalChatCompletion

client = LocalChatCompletion(base_url=sys.argv[1], model=sys.argv[2], tokenizer_backend=None, max_retries=1)
try:
    client.model_call([JsonChatStr(json.dumps([{"role": "user", "content": "hi"}]))], generate=True,
                      gen_kwargs={"until": ["\n"], "max_gen_toks": 4})
    print(200)
except requests.HTTPError as exc:
    print(exc.response.status_code)
"""


def wrong_key_status(base_url: str, model: str, env: dict[str, str]) -> int:
    """The HTTP status the harness's client gets with a wrong OPENAI_API_KEY (by environment, as the harness reads it)."""
    proc = subprocess.run([PYTHON, "-c", WRONG_KEY_PROBE, base_url, model], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "OPENAI_API_KEY": "sk-" + "0" * 32}, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(proc.stdout.strip().splitlines()[-1])
