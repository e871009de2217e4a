"""`make webui` for the CPU demo, looked at by a real headless Chromium (`pytest -m train`).

Chromium is driven through its DevTools protocol (a websocket; `websockets` comes with Gradio): load the
page, wait until LlamaBoard has filled in its labels (they arrive from the server after the page loads),
assert on the tabs and controls a person sees, save a screenshot next to the test's temporary files, then
stop the server and check nothing listens any more. Chromium is Debian's `chromium` (CI installs it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import PYTHON, offline_env, wait_until
from tests.train.test_chat_serve import Server, assert_nothing_left, free_port

pytestmark = pytest.mark.train
# Root in a container or CI needs --no-sandbox; the rest keeps a headless browser off the network.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1800"]
TABS = ["Train", "Evaluate & Predict", "Chat", "Export"]
CONTROLS = ["Language", "Model name", "Model path", "Finetuning method", "Chat template", "Dataset",
            "Learning rate", "Epochs", "Cutoff length", "Batch size", "LoRA configurations", "Preview command",
            "Start", "Abort"]


def chromium() -> str:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    if found:
        return found
    message = "Debian's chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("ROCMFT_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message}: CI installs it")
    pytest.skip(reason=message)


class DevTools:
    """The smallest DevTools client: one page, request/response by id."""

    def __init__(self, ws_url: str):
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=64 * 1024 * 1024, proxy=None)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def open_browser(browser: str, profile: Path, env: dict[str, str]) -> tuple[subprocess.Popen, DevTools]:
    proc = subprocess.Popen([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    active = profile / "DevToolsActivePort"

    def ready() -> bool:
        assert proc.poll() is None, "chromium exited at start"
        return active.is_file() and bool(active.read_text().strip())

    wait_until(ready, timeout=120, what="chromium's DevTools port")
    port = int(active.read_text().split()[0])
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    pages = json.loads(direct.open(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
    page = next(p for p in pages if p.get("type") == "page")
    return proc, DevTools(page["webSocketDebuggerUrl"])


def test_make_webui_cpu_demo_shows_llamaboard_in_chromium(tmp_path, tiny_model, process_mark):
    browser_path = chromium()  # before anything starts: a skip (no Chromium) must leave nothing listening
    # the server and the browser carry the test's mark: stopped at teardown whatever the outcome
    env = process_mark.env(offline_env(tmp_path, BROWSER="true", GRADIO_SHARE="1", VERBOSE="1"))
    # Gradio's inbrowser=True must open nothing; GRADIO_SHARE=1 inherited from the shell must not open a
    # public share link; VERBOSE=1 shows Gradio's lines
    port = free_port()
    server = Server(["make", "-s", "webui", f"PORT={port}"], env)
    line = server.wait_for("LlamaBoard: ")
    assert f"LlamaBoard: http://127.0.0.1:{port}/  (cpu, local)" in line
    password = server.wait_for("log in as rocmft, password ").split("password ", 1)[1].split(" ")[0]
    browser, tools = open_browser(browser_path, tmp_path / "chromium-profile", env)
    tools.call("Page.enable")
    tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
    # on loopback too, the page is Gradio's login first (issue 32): log in as a person's form would
    wait_until(lambda: tools.evaluate("document.readyState") == "complete", timeout=60, what="the login page")
    status = tools.call("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression=(
        "fetch('/login', {method: 'POST', body: new URLSearchParams({username: 'rocmft', password: "
        f"{json.dumps(password)}}})}}).then(r => r.status)"))["result"].get("value")
    assert status == 200, status
    tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
    text = ""

    def filled_in() -> bool:
        nonlocal text
        text = tools.evaluate("document.body ? document.body.innerText : ''") or ""
        return all(label in text for label in CONTROLS)

    try:
        wait_until(filled_in, timeout=180, what="LlamaBoard's labels in the page")
    except AssertionError:
        pass  # the screenshot and the missing labels below say more
    shot = tmp_path / "llamaboard.png"
    shot.write_bytes(base64.b64decode(tools.call("Page.captureScreenshot", format="png")["data"]))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    tabs = tools.evaluate("Array.from(document.querySelectorAll('button[role=tab]')).map(b => b.innerText.trim())")
    assert tabs == TABS, tabs
    missing = [label for label in CONTROLS if label not in text]
    assert not missing, f"LlamaBoard's controls not in the page: {missing} (screenshot: {shot})"
    assert tools.evaluate("document.title").startswith("LLaMA Factory")
    inputs = tools.evaluate("document.querySelectorAll('input, textarea, button').length")
    assert inputs > 50  # a form to work with, not an error page
    browser.terminate()
    browser.wait(30)
    server.stop(signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
    assert_nothing_left(server, port)
    assert any(f"stopped (SIGINT); nothing is listening on port {port}" in line for line in server.lines)
    output = "\n".join(server.lines)
    assert "To create a public link, set `share=True`" in output  # Gradio's own line when it does not share
    assert "share link" not in output and "public URL" not in output and "gradio.live" not in output


def llamaboard_pids(mark) -> list[int]:
    from tests.processes import command_line

    return [pid for pid in mark.alive() if "rocmft.serve.llamaboard" in command_line(pid)]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_webui_asks_for_a_password_on_loopback_too_and_holds_no_credential(host, tmp_path, tiny_model, process_mark):
    """Issue 32: LlamaBoard loads models with trust_remote_code=True, so one unauthenticated Gradio API call
    from any local account on 127.0.0.1 ran that account's code as you. Every address (loopback, and
    127.0.0.2: beyond loopback, reachable from this machine only) gets Gradio's login: nothing without it,
    everything with the password generated and printed once; the process holds no HF_TOKEN/WANDB_API_KEY."""
    import http.cookiejar
    import urllib.error
    import urllib.parse

    port = free_port()
    env = process_mark.env({**{k: v for k, v in offline_env(tmp_path, BROWSER="true").items()
                               if k != "ROCMFT_WEBUI_PASSWORD"},
                            "HF_TOKEN": "hf_test_secret_of_the_caller", "WANDB_API_KEY": "wandb_test_secret"})
    server = Server([PYTHON, "-m", "rocmft.cli.main", "webui", "--host", host, "--port", str(port)], env)
    server.wait_for("Ctrl-C stops it")
    [line] = [ln for ln in server.lines if "log in as rocmft, password " in ln]
    password = line.split("password ", 1)[1].split(" ")[0]
    assert len(password) >= 32
    if host != "127.0.0.1":
        assert any("password (ROCMFT_WEBUI_PASSWORD)" in ln for ln in server.lines)  # the warning says what protects it
    [pid] = llamaboard_pids(process_mark)
    environ = open(f"/proc/{pid}/environ", "rb").read()
    assert b"hf_test_secret" not in environ and b"wandb_test_secret" not in environ
    base = f"http://{host}:{port}"
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    with pytest.raises(urllib.error.HTTPError) as refused:
        browser.open(f"{base}/config", timeout=30)
    assert refused.value.code == 401
    # the attack: a Gradio API call (what "load model" sends) without logging in
    join = json.dumps({"data": [], "fn_index": 0, "session_hash": "attacker", "event_data": None}).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        browser.open(urllib.request.Request(f"{base}/gradio_api/queue/join", data=join,
                                            headers={"Content-Type": "application/json"}), timeout=30)
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError):
        browser.open(f"{base}/login", data=urllib.parse.urlencode({"username": "rocmft", "password": "wrong"}).encode(),
                     timeout=30)
    browser.open(f"{base}/login", data=urllib.parse.urlencode({"username": "rocmft", "password": password}).encode(),
                 timeout=30)
    config = json.loads(browser.open(f"{base}/config", timeout=30).read())
    assert config.get("title", "").startswith("LLaMA Factory")
    server.stop(signal.SIGINT)
    assert_nothing_left(server, port)
