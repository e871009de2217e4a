"""Ports with real sockets: a taken port is one line before anything starts; readiness is an HTTP answer."""

from __future__ import annotations

import http.server
import json
import socket
import threading

from rocmft.serve import ports


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_listening_port_is_in_use_and_a_free_one_is_not():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        problem = ports.port_problem("127.0.0.1", port)
        assert problem.line() == f"error: PORT: port {port} on 127.0.0.1 is in use by another program (pick a free one: PORT={port + 1})"
        assert ports.port_problem("0.0.0.0", port) is not None  # all addresses include that one
        assert ports.listening("127.0.0.1", port)
    assert ports.port_problem("127.0.0.1", port) is None and not ports.listening("127.0.0.1", port)


def test_a_host_that_is_not_this_machine():
    problem = ports.port_problem("192.0.2.1", free_port())  # TEST-NET-1: never a local address
    assert problem.key == "HOST" and "cannot listen on 192.0.2.1" in problem.line()


class _Refuse(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_any_http_answer_means_ready_a_refused_connection_does_not():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models"
        assert ports.answers(url)  # 401: up, only the key is missing
        assert ports.wait_ready(url, alive=lambda: True)
    finally:
        server.shutdown()
        server.server_close()
    closed = f"http://127.0.0.1:{free_port()}/"
    assert not ports.answers(closed)
    assert not ports.wait_ready(closed, alive=lambda: False)  # the server died: stop waiting


class _Models(http.server.BaseHTTPRequestHandler):
    """`/v1/models` as LLaMA-Factory's API answers it: the key checked, the served model listed."""
    key, model = "k" * 32, "mine"

    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Squatter(_Models):
    """Another program on the port: answers anything (here with another model), whatever the key."""
    def do_GET(self):
        body = b'{"data": [{"id": "gpt-3.5-turbo"}]}'
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


def test_ready_means_our_model_answers_with_our_key_not_any_http_answer():
    servers = {name: http.server.HTTPServer(("127.0.0.1", 0), handler)
               for name, handler in (("ours", _Models), ("squatter", _Squatter), ("refuses", _Refuse))}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = {name: f"http://127.0.0.1:{s.server_address[1]}/v1/models" for name, s in servers.items()}
        assert ports.serves_model(url["ours"], _Models.key, "mine")
        assert not ports.serves_model(url["ours"], "another key", "mine")
        assert not ports.serves_model(url["ours"], _Models.key, "someone-elses")
        assert not ports.serves_model(url["squatter"], _Models.key, "mine")
        assert not ports.serves_model(url["refuses"], _Models.key, "mine")
        checks = []

        def alive():  # the real server could not bind the squatted port: it exits after a few polls
            checks.append(1)
            return len(checks) < 4

        def probe(u):
            return ports.serves_model(u, _Models.key, "mine")

        assert not ports.wait_ready(url["squatter"], alive, interval=0.01, probe=probe)
        assert ports.wait_ready(url["ours"], lambda: True, interval=0.01, probe=probe)
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
