"""What the vendor adapter tests share: running async bodies, and refusing the real network.

The akshare, yfinance and ccxt tests serve recorded payloads; `refuse_network` makes any real
connection attempt fail the test instead of reaching a vendor, and `loopback_only` lets one reach
this machine's own test servers only (`closed_port`, `SilentServer`).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self

import pytest


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body with `asyncio.run` (the suite has no async plugin)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


def refuse_network(monkeypatch: pytest.MonkeyPatch, *, with_curl: bool = False) -> None:
    """Fail any real connection: Python sockets, DNS, and (`with_curl`) curl_cffi's sessions.

    curl_cffi bypasses Python's sockets, so a vendor that uses it needs `with_curl`.
    """

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a test tried to reach the network: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    if with_curl:
        import curl_cffi.requests

        monkeypatch.setattr(curl_cffi.requests.Session, "request", refuse)


def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Like `refuse_network`, but let Python sockets reach this machine's own test servers."""
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def resolve(host: object, *args: Any, **kwargs: Any) -> Any:
        if host not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"a test tried to resolve {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self: socket.socket, address: Any) -> None:
        if not (isinstance(address, tuple) and address[0] == "127.0.0.1"):
            raise AssertionError(f"a test tried to reach the network: {address!r}")
        real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class SilentServer:
    """A loopback TCP server that holds every connection open without a word (a hung vendor, or a
    resolver that never answers); with `holding=False` it closes them at once until `hold()`."""

    def __init__(self, *, holding: bool = True) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._holding = threading.Event()
        if holding:
            self._holding.set()
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            if self._holding.is_set():
                self._held.append(connection)
            else:
                connection.close()

    def hold(self) -> None:
        """From now on, hold connections open instead of closing them."""
        self._holding.set()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def release(self) -> None:
        """Stop serving and close every held connection (what waits on them fails at once)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        for connection in self._held:
            connection.close()

    def __exit__(self, *exc: object) -> None:
        self.release()
