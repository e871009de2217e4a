"""Ports: free before anything starts, answering before the URL is printed."""

from __future__ import annotations

import errno
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from ..io.problems import Problem


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET


def port_problem(host: str, port: int) -> Problem | None:
    """Bind it the way the server will (SO_REUSEADDR, as uvicorn and Gradio do): taken -> one line."""
    host = host.strip("[]")
    try:
        sock = socket.socket(_family(host), socket.SOCK_STREAM)
    except OSError as exc:
        return Problem("", "HOST", f"cannot listen on {host}: {exc.strerror}")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return Problem("", "PORT", f"port {port} on {host} is in use by another program",
                           f"pick a free one: PORT={port + 1}")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return Problem("", "PORT", f"port {port} needs privileges to listen on", "use a port above 1023")
        return Problem("", "HOST", f"cannot listen on {host}:{port}: {exc.strerror}",
                       "HOST must be an address of this machine, e.g. 127.0.0.1 or 0.0.0.0")
    finally:
        sock.close()
    return None


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    """Does anything accept connections there?"""
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


def answers(url: str, timeout: float = 2.0) -> bool:
    """Any HTTP answer (a 401 without the key, a 404) means the server is up; a refused, reset or
    empty connection does not (Docker's port proxy accepts before the server inside listens)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    try:
        with opener.open(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def serves_model(url: str, key: str, model: str, timeout: float = 2.0) -> bool:
    """Our API server, not just any: `/v1/models` with the key lists the model we serve. Another program on the
    port (one that took it between our check and the server's bind) answers something else, and must never
    be told "ready" - the key is printed then, and clients would send it prompts."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with opener.open(request, timeout=timeout) as answer:
            listed = json.loads(answer.read(65536))
    except (OSError, ValueError):  # HTTPError (a 401: not our key) is an OSError
        return False
    data = listed.get("data") if isinstance(listed, dict) else None
    return isinstance(data, list) and any(isinstance(m, dict) and m.get("id") == model for m in data)


def wait_ready(url: str, alive: Callable[[], bool], stop: Callable[[], bool] = lambda: False,
               interval: float = 0.5, probe: Callable[[str], bool] = answers) -> bool:
    """Poll until the server answers (True), or it died / a stop was asked (False). No timeout: loading a
    70B model takes as long as it takes, and Ctrl-C ends the wait."""
    while alive() and not stop():
        if probe(url):
            return True
        time.sleep(interval)
    return False
