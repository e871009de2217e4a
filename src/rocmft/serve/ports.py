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


def proves_ready(url: str, secret: str, model: str, timeout: float = 2.0) -> bool:
    """Our API server, not whatever took the port: asked with a fresh random challenge, it answers the proof only
    the holder of this server's one-time secret can compute (plan.ready_proof). The request carries no key: a
    program that took the port between our check and the server's bind learns a challenge, nothing it can use
    (issue 43, N4), and is never told "ready" (the key is printed then, and clients would send it prompts)."""
    import hmac
    import secrets
    import urllib.parse

    from .plan import ready_proof

    challenge = secrets.token_hex(16)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url}?{urllib.parse.urlencode({'challenge': challenge})}", timeout=timeout) as answer:
            proof = json.loads(answer.read(4096)).get("proof")
    except (OSError, ValueError, AttributeError):  # HTTPError is an OSError; a list has no .get
        return False
    return isinstance(proof, str) and hmac.compare_digest(proof, ready_proof(secret, challenge, model))


def wait_ready(url: str, alive: Callable[[], bool], stop: Callable[[], bool] = lambda: False,
               interval: float = 0.5, probe: Callable[[str], bool] = answers) -> bool:
    """Poll until the server answers (True), or it died / a stop was asked (False). No timeout: loading a
    70B model takes as long as it takes, and Ctrl-C ends the wait."""
    while alive() and not stop():
        if probe(url):
            return True
        time.sleep(interval)
    return False
