"""`model_name_or_path` that is neither a local dir nor in the HF cache is caught on the host, before a run dir.

The offline paths run for real against a real cache layout (the tiny model copied into
`<HF_HOME>/hub/models--org--name/snapshots/<rev>/`, as huggingface_hub lays it out). The Hub is not reachable
here: its request is checked as data, its answers are read as data, and `send` talks real HTTP to a local
server that answers the way the Hub's auth-check endpoint does.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading

import pytest

from rocmft.io import hubcache, paths
from rocmft.validate import model
from rocmft.validate.model import HubAnswer, HubRequest
from tests.conftest import PYTHON

REPO = "meta-llama/Meta-Llama-3-8B-Instruct"


@pytest.fixture
def hf_home(tmp_path):
    return tmp_path / "hf"


def cache_entry(hf_home, repo: str, model_dir, commit: str = "0123abcd" * 5) -> None:
    """The layout huggingface_hub writes: the files under snapshots/<commit>/, refs/main naming the commit."""
    folder = hf_home / "hub" / hubcache.repo_folder(repo)
    shutil.copytree(model_dir, folder / "snapshots" / commit)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)


@pytest.fixture(scope="module")
def tiny_model_dir(tiny_model):
    return tiny_model


def test_offline_cache_hit_is_fine(hf_home, tiny_model_dir):
    cache_entry(hf_home, REPO, tiny_model_dir)
    env = {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    assert model.check(REPO, paths.root(), env) == []


def test_offline_cache_miss_is_one_line_naming_the_model_the_cache_and_make_fetch(hf_home, tiny_model_dir):
    cache_entry(hf_home, "other/model", tiny_model_dir)
    env = {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    (problem,) = model.check(REPO, paths.root(), env, file="recipes/x.yaml", key="llamafactory.model_name_or_path")
    line = problem.line()
    assert problem.severity == "error" and "\n" not in line
    assert f"model `{REPO}` is neither a local model dir nor in the Hugging Face cache ({hf_home / 'hub'})" in line
    assert f"make fetch MODEL={REPO}" in line and "HF_HUB_OFFLINE=1" in line


def test_a_snapshot_without_config_json_or_without_a_ref_is_a_miss(hf_home, tiny_model_dir):
    (hf_home / "hub" / hubcache.repo_folder(REPO) / "snapshots" / "rev").mkdir(parents=True)
    env = {"HF_HOME": str(hf_home), "TRANSFORMERS_OFFLINE": "1"}  # huggingface_hub honours the older name too
    assert [p.severity for p in model.check(REPO, paths.root(), env)] == ["error"]
    unreferenced = hf_home / "hub" / hubcache.repo_folder("org/unref") / "snapshots" / "c0ffee"
    shutil.copytree(tiny_model_dir, unreferenced)  # no refs/main: offline huggingface_hub does not find it
    assert [p.severity for p in model.check("org/unref", paths.root(), env)] == ["error"]


def test_the_job_agrees_offline_transformers_loads_the_hit_and_refuses_the_miss(hf_home, tiny_model_dir):
    cache_entry(hf_home, "rocmft-test/tiny-llama", tiny_model_dir)
    env = {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(hf_home)}
    assert model.check("rocmft-test/tiny-llama", paths.root(), env) == []
    assert model.check("rocmft-test/absent", paths.root(), env)[0].severity == "error"
    code = ("import sys; from transformers import AutoConfig, AutoTokenizer\n"
            "AutoConfig.from_pretrained('rocmft-test/tiny-llama'); AutoTokenizer.from_pretrained('rocmft-test/tiny-llama')\n"
            "try:\n    AutoConfig.from_pretrained('rocmft-test/absent')\nexcept OSError:\n    sys.exit(3)\n")
    proc = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 3, proc.stderr[-2000:]


def test_local_paths_are_left_to_the_inputs_check_and_never_ask_the_hub(tmp_path):
    def never(request, env):
        raise AssertionError("asked the Hub about a local path")

    (tmp_path / "models").mkdir()  # models/x: a folder of the project, not the Hub org `models`
    for name in ("/abs/model", "./rel", "~/m", "models/not-built"):
        assert model.check(name, tmp_path, {}, ask=never) == []


def test_a_name_that_is_no_path_and_no_repo_id_is_refused(tmp_path):
    (problem,) = model.check("a/b/c", tmp_path, {"HF_HOME": str(tmp_path)}, ask=None)
    assert "neither a local model dir" in problem.message and "Hub repo id" in problem.message


def test_the_online_request_is_the_hub_auth_check_and_names_the_token_only():
    env = {"HF_TOKEN": "hf_secret_value", "HF_ENDPOINT": "https://hub.example/"}
    request = model.auth_request(REPO, env)
    assert request.url == f"https://hub.example/api/models/{REPO}/auth-check"
    assert request.token_from == "HF_TOKEN"
    assert "hf_secret_value" not in repr(request)
    assert model.auth_request(REPO, {"HUGGING_FACE_HUB_TOKEN": "x"}).token_from == "HUGGING_FACE_HUB_TOKEN"


def test_the_stored_login_token_is_named_by_its_file(tmp_path):
    (tmp_path / "token").write_text("hf_abc\n")
    request = model.auth_request(REPO, {"HF_HOME": str(tmp_path)})
    assert request.token_from == str(tmp_path / "token")
    assert model.auth_request(REPO, {"HF_HOME": str(tmp_path / "none")}).token_from == ""


@pytest.mark.parametrize("answer, token, severity, words", [
    (HubAnswer(200), "", "note", ["downloads it when it starts", "make fetch MODEL="]),
    (HubAnswer(401, "GatedRepo"), "", "error", ["is gated on the Hub and no HF_TOKEN is set",
                                                 f"accept its license at https://huggingface.co/{REPO}"]),
    (HubAnswer(403, "GatedRepo"), "HF_TOKEN", "error", ["token from HF_TOKEN cannot read it", "has not accepted the license"]),
    (HubAnswer(401, "", "Invalid credentials in Authorization header"), "HF_TOKEN", "error", ["not a valid Hub token"]),
    (HubAnswer(404, "RepoNotFound"), "", "error", ["nor a model repo on the Hub (a private repo needs HF_TOKEN)"]),
    (HubAnswer(401, "RepoNotFound"), "HF_TOKEN", "error", ["nor a model repo on the Hub that the token from HF_TOKEN can read"]),
    (HubAnswer(403, "", "fine-grained token"), "HF_TOKEN", "error", ["refuses the token from HF_TOKEN", "fine-grained"]),
    (HubAnswer(503), "", "warning", ["HTTP 503", "not checked"]),
    (None, "", "error", ["the Hub cannot be reached from here (no route)", "HF_HUB_OFFLINE=1"]),
])
def test_each_hub_answer_is_one_line(answer, token, severity, words):
    request = HubRequest(f"https://huggingface.co/api/models/{REPO}/auth-check", token)
    (problem,) = model.verdict(REPO, request, answer, {}, reason="no route")
    assert problem.severity == severity and "\n" not in problem.line()
    for word in words:
        assert word in problem.line()


def test_a_misspelt_table_model_gets_a_did_you_mean():
    request = model.auth_request("meta-llama/Meta-Llama-3-8B-Instruc", {})
    (problem,) = model.verdict("meta-llama/Meta-Llama-3-8B-Instruc", request, HubAnswer(404), {}, known=(REPO,))
    assert f"did you mean `{REPO}`?" in problem.line()


class _GatedHub(http.server.BaseHTTPRequestHandler):
    seen: list = []  # noqa: RUF012 (the requests this server saw, read by the test)

    def do_GET(self):
        _GatedHub.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(403)
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_send_over_real_http_sends_the_token_from_the_environment_and_reads_the_error_code(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _GatedHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}", "HF_TOKEN": "hf_tok", "HF_HOME": str(tmp_path)}
        (problem,) = model.check(REPO, paths.root(), env)
    finally:
        server.shutdown()
    assert _GatedHub.seen == [(f"/api/models/{REPO}/auth-check", "Bearer hf_tok")]
    assert "gated and the token from HF_TOKEN cannot read it" in problem.line()
    assert "hf_tok" not in problem.line()


def test_an_unreachable_hub_is_an_error_not_a_traceback(tmp_path):
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path)}  # port 9 (discard): nothing listens
    (problem,) = model.check(REPO, paths.root(), env)
    assert problem.severity == "error" and "cannot be reached from here" in problem.line()


class _Redirecting(http.server.BaseHTTPRequestHandler):
    """A Hub endpoint that sends the check elsewhere: `/same/...` on itself, anything else to `target`."""
    target = ""

    def do_GET(self):
        if self.path.startswith("/same/"):
            _GatedHub.seen.append(("here", self.headers.get("Authorization")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(302)
        self.send_header("Location", f"{self.target}{self.path}" if self.target else f"/same{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_token_never_follows_a_redirect_to_another_host(tmp_path):
    """Real HTTP on 127.0.0.1: the endpoint answers 302 to another server (another port: another origin); that
    server must not receive the Authorization header. A redirect on the same host keeps it."""
    other = http.server.HTTPServer(("127.0.0.1", 0), _GatedHub)
    hub = http.server.HTTPServer(("127.0.0.1", 0), _Redirecting)
    for server in (other, hub):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{hub.server_port}", "HF_TOKEN": "hf_tok", "HF_HOME": str(tmp_path)}
    try:
        _GatedHub.seen = []
        _Redirecting.target = f"http://127.0.0.1:{other.server_port}"
        model.check(REPO, paths.root(), env)
        assert _GatedHub.seen == [(f"/api/models/{REPO}/auth-check", None)]
        _GatedHub.seen = []
        _Redirecting.target = ""  # to itself
        assert all(p.severity != "error" for p in model.check(REPO, paths.root(), env))
        assert _GatedHub.seen == [("here", "Bearer hf_tok")]
    finally:
        for server in (other, hub):
            server.shutdown()
            server.server_close()
