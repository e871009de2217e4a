"""A local HTTP stand-in for the Hugging Face Hub, enough for huggingface_hub's create_repo, repo_info and
create_commit (the endpoints huggingface_hub 1.x calls: api/repos/create, api/models/<repo>, .../preupload/<rev>,
.../commit/<rev>), recording every request: method, path, headers and body. Every file is answered `regular`
(its bytes travel inside the commit, base64), so the commit holds exactly what was sent; the Hub's LFS/Xet
transfer of large files is not exercised here."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Hub:
    requests: list[Request] = field(default_factory=list)
    repos: dict[str, bool] = field(default_factory=dict)  # repo -> private
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # repo -> {path: content}
    url: str = ""

    def committed(self, repo: str) -> dict[str, bytes]:
        return self.commits.get(repo, {})


def _handler(hub: Hub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, payload) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> Request:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else b""
            req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            hub.requests.append(req)
            return req

        def do_GET(self):
            req = self._record()
            parts = req.path.split("?")[0].strip("/").split("/")
            if parts == ["api", "agent-harnesses"]:  # huggingface_hub's user-agent registry, asked without a token
                return self._send(200, {})
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                repo = "/".join(parts[2:4])
                if repo in hub.repos:
                    return self._send(200, {"id": repo, "private": hub.repos[repo], "sha": "0" * 40, "siblings": []})
            self._send(404, {"error": "not found"})

        def do_POST(self):
            req = self._record()
            parts = req.path.split("?")[0].strip("/").split("/")
            if parts == ["api", "validate-yaml"]:  # the card's front matter, as the Hub checks it before a commit
                content = json.loads(req.body)["content"]
                try:
                    yaml.safe_load(content.split("---")[1])
                except (IndexError, yaml.YAMLError) as exc:
                    return self._send(400, {"errors": [{"message": str(exc)}]})
                return self._send(200, {"errors": [], "warnings": []})
            if parts == ["api", "repos", "create"]:
                data = json.loads(req.body)
                repo = f"{data['organization']}/{data['name']}" if data.get("organization") else data["name"]
                if repo in hub.repos:
                    return self._send(409, {"error": "You already created this model repo", "url": f"{hub.url}/{repo}"})
                # huggingface_hub 1.x sends `visibility`; an absent one is the Hub's default: public
                hub.repos[repo] = data.get("visibility", "private" if data.get("private") else "public") == "private"
                return self._send(200, {"url": f"{hub.url}/{repo}", "name": repo})
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
                files = json.loads(req.body)["files"]
                return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                  for f in files]})
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
                repo = "/".join(parts[2:4])
                files = hub.commits.setdefault(repo, {})
                for line in req.body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                return self._send(200, {"commitUrl": f"{hub.url}/{repo}/commit/{'1' * 40}", "commitOid": "1" * 40})
            self._send(404, {"error": "not found"})

    return Handler


class Serving:
    """`with Serving() as hub:` a stand-in on 127.0.0.1 (a free port) for the block."""

    def __enter__(self) -> Hub:
        self.hub = Hub()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.hub))
        self.hub.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.hub

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
