"""What the vendor adapter tests share: running async bodies, and refusing the real network.

The akshare, yfinance and ccxt tests serve recorded payloads; `refuse_network` makes any real
connection attempt fail the test instead of reaching a vendor.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Coroutine
from typing import Any

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
