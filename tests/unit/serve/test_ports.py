"""Ports with real sockets: a taken port is one line before anything starts; readiness is an HTTP answer."""

from __future__ import annotations

import http.server
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
