"""Talking to a real trained tiny-cpu run, as a user does after `make demo` (`pytest -m train`):

- `make chat RUN=<run> PROMPT=hello` prints a non-empty answer on stdout (and only the answer); the same
  for the run's merged export (`make export`);
- `make serve` on 127.0.0.1 and a free port: the real `openai` client gets a chat completion and a
  streamed one; SIGTERM to the make process group (what a terminal's Ctrl-C reaches) and SIGINT to the
  rocmft process alone both leave nothing listening and no process behind;
- with ROCMFT_API_KEY set, a request without the key is refused (401) and one with it answered; FastAPI's
  /docs, /redoc and /openapi.json are not there (404); a generic API_KEY exported for another service is never
  the server's key.

They talk to the session's trained tiny-cpu run (`trained_run`, tests/conftest.py), read-only; answers are
greedy (SET=do_sample=false), so what a random-ish tiny model says is the same on every run of the tests.
"""

from __future__ import annotations

import http.server
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests import processes
from tests.conftest import PYTHON, ROOT, TrainedRun, offline_env, wait_until

pytestmark = pytest.mark.train
KEY = "sk-rocmft-test-key-789"


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model):
    return offline_env(tmp_path_factory.mktemp("chat"))


@pytest.fixture(scope="module")
def run(trained_run: TrainedRun) -> Path:
    return trained_run.path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Server:
    """A foreground server command (make serve/webui, rocmft serve) in its own session, its output read
    line by line, so a test waits for the line that says where it answers."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.env = env
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return line
        self.stop(signal.SIGKILL)
        pytest.fail(f"no line with {text!r}; output:\n" + "\n".join(self.lines[-60:]))

    def stop(self, sig=signal.SIGTERM, group: bool = True, timeout: float = 60) -> int:
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def group_gone(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return True
        return False


def assert_nothing_left(server: Server, port: int) -> None:
    """Nothing listens on the port and no process the server command started is alive: not in its process
    group, nor (with `process_mark` in its env) one that left the group for a session of its own."""
    mark = processes.Mark(processes.TEST_VAR, server.env[processes.TEST_VAR]) if processes.TEST_VAR in server.env else None
    # the launcher may still be stopping its server when make has exited: wait for that, generously
    wait_until(lambda: not listening(port) and server.group_gone() and not (mark and mark.alive()), timeout=60,
               what=f"the server on port {port} and its processes gone")
    if mark is None:  # without a mark, by the port in command lines (another test may reuse the port later)
        out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
        assert f"API_PORT={port}" not in out and f"--port {port}" not in out


def chat(env, run: Path, prompt: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "chat", f"RUN={run}", f"PROMPT={prompt}", "SET=max_new_tokens=24 do_sample=false", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def generated_key(server: Server) -> str:
    """The key a server generated when no ROCMFT_API_KEY was exported: printed once, as an export line."""
    [line] = [ln for ln in server.lines if "export ROCMFT_API_KEY=" in ln]
    return line.split("export ROCMFT_API_KEY=", 1)[1].strip()


def test_make_chat_prompt_prints_an_answer(env, run):
    proc = chat(env, run, "hello, 'quoted' \"twice\"")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip(), proc.stderr
    assert "[rocmft]" not in proc.stdout and "INFO" not in proc.stdout  # stdout is the answer alone
    assert f"{run}/output, template llama3 (local)" in proc.stderr


def test_interactive_chat_is_quiet_and_ends_cleanly_at_the_end_of_input(env, run):
    """`make chat` without PROMPT: LLaMA-Factory's chat loop, its libraries' log kept off the terminal, and the end
    of input (Ctrl-D; here the end of a pipe) ends it with exit 0 instead of an EOFError traceback."""
    proc = subprocess.run(["make", "-s", "chat", f"RUN={run}", "SET=max_new_tokens=8 do_sample=false"], cwd=ROOT,
                          env=env, input="hello\nclear\n", capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "EOFError" not in out
    assert "User: Assistant: " in proc.stdout and "History has been removed." in proc.stdout
    # what LLaMA-Factory and transformers log while loading (`[INFO|...]`, "llamafactory.", config dumps) is not shown
    assert "[INFO" not in out and "llamafactory" not in out.lower().replace("llamafactory-cli", ""), out[-2000:]
    loud = subprocess.run(["make", "-s", "chat", f"RUN={run}", "SET=max_new_tokens=4 do_sample=false", "VERBOSE=1"],
                          cwd=ROOT, env=env, input="", capture_output=True, text=True, timeout=600)
    assert loud.returncode == 0 and "[INFO" in loud.stdout + loud.stderr  # VERBOSE=1 shows it


def test_the_prompt_is_in_no_command_line_but_makes_own(env, run, tmp_path):
    """Every local user reads every command line (`ps`): while `make chat PROMPT=` runs, the real job
    (rocmft.serve.ask) and the CLI before it name a private file, and only make's own argv holds the prompt
    (docs/security.md says so, and offers PROMPT_FILE=). The file is gone when the answer is printed."""
    import re
    import uuid

    secret = f"my private question {uuid.uuid4().hex}"
    mark = processes.Mark(processes.TEST_VAR)
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(["make", "-s", "chat", f"RUN={run}", f"PROMPT={secret}", "SET=max_new_tokens=8 do_sample=false"],
                                cwd=ROOT, env=mark.env(env), stdout=out, stderr=err)
        try:
            seen = processes.command_lines_until_exit(proc, mark)
        finally:
            mark.stop()
    assert proc.wait() == 0, (tmp_path / "err").read_text()[-3000:]
    assert (tmp_path / "out").read_text().strip()
    assert {pid for pid, line in seen if secret in line} == {proc.pid}, sorted(seen)  # make's alone
    asks = [line for _, line in seen if "-m rocmft.serve.ask --prompt-file=" in line]
    assert asks, sorted(seen)  # the job was seen: this test can fail
    assert any(" chat " in line and "--prompt-file=-" in line for _, line in seen), sorted(seen)  # the CLI
    prompt_file = Path(re.search(r"--prompt-file=(\S+)", asks[0]).group(1))
    assert prompt_file.parent.parent == ROOT / ".cache" / "serve" and not prompt_file.parent.exists()


def test_make_export_merges_once_then_make_chat_last_talks_to_the_merged_export(env, run):
    """The one merge of the tiny adapter in CI (`make export`): merged/ written, a second export refused."""
    copy = Path(env["ROCMFT_RUNS"]) / "talk-merged"
    shutil.copytree(run, copy)  # export writes into the run; `last` is the newest run in this module's runs
    exported = subprocess.run(["make", "-s", "export", f"RUN={copy}"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert (copy / "merged" / "model.safetensors").is_file() and (copy / "merged" / "config.json").is_file()
    again = subprocess.run(["make", "-s", "export", f"RUN={copy}"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode != 0 and "not overwritten" in again.stderr, again.stderr[-2000:]  # nothing lost
    proc = chat(env, "last", "hello")  # the copy is the newest run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip()
    assert f"{copy}/merged (merged export), template llama3" in proc.stderr


def test_make_serve_answers_the_openai_client_and_stops_on_sigterm(env, run, process_mark):
    import openai

    port = free_port()
    log = ROOT / ".cache" / "serve" / f"api-{run.name}.log"
    logged = log.stat().st_size if log.exists() else 0
    server = Server(["make", "-s", "serve", f"RUN={run}", f"PORT={port}", "SET=max_new_tokens=16 do_sample=false"],
                    process_mark.env(env))  # stopped at teardown whatever happens here
    server.wait_for("Ctrl-C stops it")
    text = "\n".join(server.lines)
    assert f"OpenAI base URL: http://127.0.0.1:{port}/v1" in text
    assert f"curl http://127.0.0.1:{port}/v1/chat/completions" in text
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=generated_key(server), max_retries=0)
    assert [m.id for m in client.models.list().data] == [run.name]
    done = client.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hello"}])
    assert done.choices[0].message.content.strip() and 0 < done.usage.completion_tokens <= 16  # SET= reached it
    stream = client.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hello"}], stream=True)
    chunks = [c for c in stream if c.choices]
    # a real event stream (role, text, finish), whose text is the greedy answer above; how many text pieces it
    # holds is the tokenizer's affair (transformers' streamer holds text back until a space)
    assert len(chunks) > 1 and chunks[-1].choices[0].finish_reason
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed.strip() and streamed.strip() == done.choices[0].message.content.strip()
    # the requests' messages are printed nowhere (LLaMA-Factory dumps each one unless API_VERBOSE=0): not on the
    # terminal, not in the log
    with open(log, "rb") as fh:
        fh.seek(logged)
        written = fh.read().decode("utf-8", "replace")
    for text in ("\n".join(server.lines), written):
        assert "==== request ====" not in text and '"content": "hello"' not in text
    server.stop(signal.SIGTERM)
    assert_nothing_left(server, port)
    assert any(f"stopped (SIGTERM); nothing is listening on port {port}" in line for line in server.lines)


def test_api_key_refuses_a_request_without_it_and_sigint_to_the_launcher_alone_stops_it(env, run, process_mark):
    import openai

    port = free_port()
    server = Server([PYTHON, "-m", "rocmft.cli.main", "serve", str(run), "--port", str(port),
                     "--set", "max_new_tokens=8 do_sample=false"], process_mark.env({**env, "ROCMFT_API_KEY": KEY}))
    server.wait_for("Ctrl-C stops it")
    assert KEY not in "\n".join(server.lines)  # by name only: `Bearer $ROCMFT_API_KEY`
    assert any('-H "Authorization: Bearer $ROCMFT_API_KEY"' in line for line in server.lines)
    anonymous = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        anonymous.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}])
    import urllib.error
    import urllib.request

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as refused:  # no Authorization header at all
        direct.open(f"http://127.0.0.1:{port}/v1/models", timeout=10)
    assert refused.value.code == 401
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):  # FastAPI's, keyless: removed
        for headers in ({}, {"Authorization": f"Bearer {KEY}"}):
            with pytest.raises(urllib.error.HTTPError) as refused:
                direct.open(urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers), timeout=10)
            assert refused.value.code == 404, path
    keyed = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    assert keyed.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}]).choices
    assert server.stop(signal.SIGINT, group=False) == 0  # the launcher alone: it stops its server itself
    assert_nothing_left(server, port)


def test_without_rocmft_api_key_a_key_is_generated_and_a_web_page_cannot_use_the_api(env, run, process_mark):
    """LLaMA-Factory's API allows every CORS origin: a page on any site, open in the user's browser, could
    post to 127.0.0.1 and read the answer. A request carrying a foreign Origin and no key is refused; the
    real openai client with the generated key is answered; the request log is the user's alone. A generic
    API_KEY exported for another service is not the server's key (LLaMA-Factory reads API_KEY: it was)."""
    import json
    import stat
    import urllib.error
    import urllib.request

    import openai

    port = free_port()
    another = "sk-another-services-key-0123456789"
    server = Server(["make", "-s", "serve", f"RUN={run}", f"PORT={port}", "SET=max_new_tokens=8 do_sample=false"],
                    process_mark.env({**{k: v for k, v in env.items() if k != "ROCMFT_API_KEY"},
                                      "API_KEY": another}))  # stopped at teardown
    server.wait_for("Ctrl-C stops it")
    key = generated_key(server)
    assert len(key) >= 32 and sum(key in line for line in server.lines) == 1  # printed once
    assert any("the API_KEY in your environment is not used" in line for line in server.lines)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=another, max_retries=0).models.list()
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"model": run.name, "messages": [{"role": "user", "content": "hi"}]}).encode()
    for path, data in (("/v1/chat/completions", body), ("/v1/models", None)):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers={
            "Origin": "http://evil.example", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            direct.open(request, timeout=30)
        assert refused.value.code == 401, path
    keyed = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0)
    assert keyed.chat.completions.create(model=run.name, messages=[{"role": "user", "content": "hi"}]).choices
    log = ROOT / ".cache" / "serve" / f"api-{run.name}.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    server.stop(signal.SIGTERM)
    assert_nothing_left(server, port)


class _Squatter(http.server.BaseHTTPRequestHandler):
    """A program that took the port while the model loads: keeps every request line and header it is sent."""
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        _Squatter.seen.append(f"{self.requestline}\n{self.headers}")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_program_that_takes_the_port_while_the_model_loads_never_gets_the_key(env, run, process_mark):
    """N4 (issue 43): the readiness probe asked `/v1/models` with the API key, so whatever took the port between the
    launcher's check and the server's bind was sent the key, every half second. The real `rocmft serve` with the key
    exported; once it says it is loading, a program binds its port (as uvicorn would, SO_REUSEADDR) and records."""
    port = free_port()
    server = Server([PYTHON, "-m", "rocmft.cli.main", "serve", str(run), "--port", str(port)],
                    process_mark.env({**env, "ROCMFT_API_KEY": KEY}))
    server.wait_for("loading ")
    squatter = http.server.HTTPServer(("127.0.0.1", port), _Squatter)
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    try:
        wait_until(lambda: len(_Squatter.seen) >= 2 or server.proc.poll() is not None, timeout=240,
                   what="the launcher's readiness probes reaching the program on its port")
        code = server.proc.wait(timeout=240)  # the real server cannot bind the taken port: it exits, and so does serve
    finally:
        squatter.shutdown()
        squatter.server_close()
        seen, _Squatter.seen = list(_Squatter.seen), []
    assert seen, "no probe reached the port"
    assert not any(KEY in request for request in seen), f"the key went to the program on the port: {seen[0]}"
    assert code != 0 and not any("Ctrl-C stops it" in line for line in server.lines)
