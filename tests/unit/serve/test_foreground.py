"""The foreground loop with real processes (a stdlib HTTP server stands in for LLaMA-Factory's): the URL
lines only once it answers, Ctrl-C stops it and leaves nothing listening, a server that dies at start
shows its last lines and its exit code."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

from rocmft.serve import foreground, local, plan, ports


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ready_lines_once_it_answers_then_ctrl_c_stops_it(tmp_path, capsys):
    port = free_port()
    srv = plan.ServePlan("webui", "local", "cpu", (), {}, host="127.0.0.1", port=port, name="t")
    handle = local.Process([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], dict(os.environ))
    seen = []
    # what the process had before: Python's handler, or SIG_IGN when started in the background (`cmd &`)
    before = signal.getsignal(signal.SIGINT)

    def ready_lines():
        seen.append(ports.listening("127.0.0.1", port))
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # the user's Ctrl-C
        return [f"at {srv.url}"]

    code = foreground.serve(srv, handle, tmp_path / "log", ready_lines=ready_lines)
    out = capsys.readouterr().out
    assert code == 0 and seen == [True]
    assert f"[rocmft] at http://127.0.0.1:{port}/" in out
    assert f"stopped (SIGINT); nothing is listening on port {port}" in out
    assert not ports.listening("127.0.0.1", port) and not handle.alive()
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored


def test_a_server_that_dies_before_answering_shows_why(tmp_path, capsys):
    srv = plan.ServePlan("api", "local", "cpu", (), {}, host="127.0.0.1", port=free_port(), name="t")
    handle = local.Process([sys.executable, "-c", "import sys; print('loading'); print('OSError: no model here'); sys.exit(3)"],
                           dict(os.environ))
    code = foreground.serve(srv, handle, tmp_path / "log", ready_lines=lambda: ["never"])
    captured = capsys.readouterr()
    assert code == 3
    assert "OSError: no model here" in captured.err and "never" not in captured.out
    assert f"exited with code 3 before it answered: {tmp_path / 'log'}" in captured.out
    assert "OSError: no model here" in (tmp_path / "log").read_text()
