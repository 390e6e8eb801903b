"""The daemon's loopback HTTP endpoint: `/healthz` and `/metrics`, on `asyncio.start_server`.

This module owns `serve_http`: a deliberately tiny HTTP/1.1 server on the daemon's own event loop
(no framework): `GET /healthz` answers the `HealthBoard` status as JSON (200, or 503 when a market
is overdue), `GET /metrics` the Prometheus text format, anything else 404 (405 for other methods).
One request per connection, bounded header size and read time. It listens on loopback only unless
the operator allowed another address (`[http] allow_remote = true`): the endpoint has no
authentication, so exposing it is a decision, not a default.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Callable
from datetime import datetime
from typing import Final

import structlog

from openbell.daemon.health import HealthBoard
from openbell.markets.errors import ConfigError, OperatorError

log = structlog.stdlib.get_logger(__name__)

_READ_TIMEOUT_S: Final = 5.0
_MAX_HEADER_BYTES: Final = 8192
_REASONS: Final = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Unavailable"}
_METRICS_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


def is_loopback(host: str) -> bool:
    """Whether `host` names the loopback interface (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve_http(
    host: str,
    port: int,
    board: HealthBoard,
    now: Callable[[], datetime],
    *,
    allow_remote: bool = False,
) -> asyncio.Server:
    """Start serving; raise `ConfigError` for a non-loopback `host` unless `allow_remote`, and
    `OperatorError` when the address cannot be listened on (a port in use)."""
    if not allow_remote and not is_loopback(host):
        raise ConfigError(
            f"[http] listen = {host!r} is not a loopback address; the endpoint has no "
            "authentication: use 127.0.0.1 (or set [http] allow_remote = true deliberately)"
        )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            if len(head) > _MAX_HEADER_BYTES:
                return
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            status, content_type, body = route(method, path, board, now())
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except ConnectionError:
            pass
        except Exception:  # a bad request must never hurt the daemon
            log.exception("http_request_failed")
        finally:
            writer.close()

    try:
        server = await asyncio.start_server(handle, host, port, limit=_MAX_HEADER_BYTES)
    except OSError as exc:  # the port is taken, or the address is not this machine's
        raise OperatorError(
            f"[http] listen = {host}:{port}: cannot listen there ({exc.strerror or exc}); "
            "stop what holds it or choose another port (0 picks a free one)"
        ) from exc
    bound = server.sockets[0].getsockname()
    log.info("http_listening", host=bound[0], port=bound[1])
    return server


def route(method: str, path: str, board: HealthBoard, now: datetime) -> tuple[int, str, bytes]:
    """The (status, content type, body) of a request for `path`."""
    if path not in {"/healthz", "/metrics"}:
        return 404, "text/plain", b"not found\n"
    if method not in {"GET", "HEAD"}:
        return 405, "text/plain", b"method not allowed\n"
    if path == "/metrics":
        return 200, _METRICS_TYPE, board.metrics()
    healthy, body = board.status(now)
    return 200 if healthy else 503, "application/json", json.dumps(body).encode() + b"\n"
