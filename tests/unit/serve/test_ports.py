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


class _Ours(http.server.BaseHTTPRequestHandler):
    """serve/api.py's readiness route: the proof of this server's one-time secret for the challenge it is sent."""
    secret, model = "r" * 43, "mine"

    def do_GET(self):  # noqa: N802 - http.server's name
        from urllib.parse import parse_qs, urlsplit

        from rocmft.serve.plan import ready_proof

        challenge = parse_qs(urlsplit(self.path).query).get("challenge", [""])[0]
        body = json.dumps({"proof": ready_proof(self.secret, challenge, self.model)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Squatter(_Ours):
    """Another program on the port: it may even answer with a proof, of a secret it does not have."""
    secret = "a guess"


class _Echo(_Ours):
    """Replays what the last launcher's probe taught it: the challenge it saw, proofs of earlier servers."""
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"proof": self.path, "challenge": self.path}).encode())


def test_ready_means_the_server_we_started_proves_its_secret_not_any_http_answer():
    servers = {name: http.server.HTTPServer(("127.0.0.1", 0), handler)
               for name, handler in (("ours", _Ours), ("squatter", _Squatter), ("echo", _Echo), ("refuses", _Refuse))}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = {name: f"http://127.0.0.1:{s.server_address[1]}/rocmft/ready" for name, s in servers.items()}
        assert ports.proves_ready(url["ours"], _Ours.secret, "mine")
        assert not ports.proves_ready(url["ours"], "another secret", "mine")
        assert not ports.proves_ready(url["ours"], _Ours.secret, "someone-elses")
        for other in ("squatter", "echo", "refuses"):
            assert not ports.proves_ready(url[other], _Ours.secret, "mine"), other
        checks = []

        def alive():  # the real server could not bind the squatted port: it exits after a few polls
            checks.append(1)
            return len(checks) < 4

        def probe(u):
            return ports.proves_ready(u, _Ours.secret, "mine")

        assert not ports.wait_ready(url["squatter"], alive, interval=0.01, probe=probe)
        assert ports.wait_ready(url["ours"], lambda: True, interval=0.01, probe=probe)
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
