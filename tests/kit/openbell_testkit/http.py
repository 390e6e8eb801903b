"""The daemon's HTTP server spoken to byte for byte, for the tests of its walls.

`served_http(**options)` runs the real `serve_http` (uvicorn, the read-deadline protocol, the app
`build_app` makes) on a free loopback port in a thread of its own, so a synchronous test (a
hypothesis one) can talk to it. `exchange(port, request)` sends raw bytes and reads the answer
until the server closes; `parse(answer)` splits it into the status and the headers. HTTP clients
normalise what they send (`//evil.example` becomes a host, a tab is refused); these helpers send
the request line as given. `leaves_site(location)` is the tests' own reading of an off-site
redirect, written apart from `daemon/redirects.py`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from openbell.daemon.http import HttpServer, serve_http

HOST = "127.0.0.1"
SITE = "http://site.example/here"


@contextmanager
def served_http(**options: Any) -> Iterator[HttpServer]:
    """`serve_http("127.0.0.1", 0, **options)` in a thread with its own event loop, until the
    block exits."""
    loop = asyncio.new_event_loop()
    started: list[HttpServer] = []
    failed: list[Exception] = []
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            started.append(loop.run_until_complete(serve_http(HOST, 0, **options)))
        except Exception as exc:  # noqa: BLE001  (raised again in the test's thread)
            failed.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(started[0].close())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(20), "the server did not start"
    if failed:
        raise failed[0]
    try:
        yield started[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(20)
        loop.close()


def exchange(port: int, request: bytes, *, timeout_s: float = 5.0) -> bytes:
    """Send `request` to the server on `port` and read its answer until it closes."""
    with socket.create_connection((HOST, port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def parse(answer: bytes) -> tuple[int, dict[str, str]]:
    """The status and the headers (lower-case names) of a raw HTTP answer."""
    head, _, _ = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


def get(port: int, target: bytes, *headers: bytes) -> tuple[int, dict[str, str]]:
    """A raw `GET target` (the request line exactly as given), answered and parsed."""
    lines = [b"GET " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    return parse(exchange(port, b"\r\n".join([*lines, *headers, b"", b""])))


def closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> float | None:
    """Send `drip` one byte every 0.1 s (nothing without it) until the server closes `sock`;
    the seconds that took, or None when it still was open after `seconds`."""
    started = time.monotonic()
    sock.settimeout(0.1)
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        try:
            if sock.recv(65536) == b"":
                return elapsed
        except TimeoutError:
            pass
        except ConnectionError:
            return elapsed
        if sent < len(drip):
            try:
                sock.sendall(drip[sent : sent + 1])
            except ConnectionError:
                return time.monotonic() - started
            sent += 1
    return None


def leaves_site(location: str) -> bool:
    """Whether `location` does not start with exactly one `/`, or some reading of it (decoded
    again and again, tabs and newlines dropped, backslashes as slashes, compatibility forms
    folded) takes a browser at `SITE` to another host."""
    if not location.startswith("/") or location.startswith("//"):
        return True
    readings = [location]
    for _ in range(10):
        decoded = unquote(readings[-1])
        if decoded == readings[-1]:
            break
        readings.append(decoded)
    else:
        return True  # still decoding: refuse
    for reading in readings:
        for form in (reading, unicodedata.normalize("NFKC", reading)):
            cleaned = "".join(ch for ch in form if ch not in "\t\n\r").lstrip("\x00 ")
            cleaned = cleaned.replace("\\", "/").replace("\uff3c", "/").replace("\ufe68", "/")
            if not cleaned.startswith("/") or cleaned.startswith("//"):
                return True
            if urlsplit(urljoin(SITE, cleaned)).netloc != "site.example":
                return True
    return False
