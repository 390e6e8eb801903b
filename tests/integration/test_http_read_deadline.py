"""The daemon's real HTTP server cuts a client that sends its request too slowly (slow-loris).

With `read_timeout_s = 1`, a connection that sends nothing, or sends its headers or its body a
byte every 0.1 s, is closed about a second after it opened; without the deadline each would hold
its connection for as long as it kept dripping (the loops here stop by themselves after 6 s). A
request that arrived in time is answered however long its answer takes, and a kept-alive
connection gets the full time again for its next request.
"""

from __future__ import annotations

import asyncio
import socket

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from openbell_testkit.http import HOST, closed_within, parse, served_http

READ_TIMEOUT_S = 1.0
#: How long each test waits for the server to close a slow connection.
PATIENCE_S = 6.0


async def hello(_request: Request) -> Response:
    return PlainTextResponse("hello\n")


async def slow_answer(_request: Request) -> Response:
    await asyncio.sleep(2.5 * READ_TIMEOUT_S)
    return PlainTextResponse("late but whole\n")


async def echo(request: Request) -> Response:
    return PlainTextResponse(f"{len(await request.body())} bytes\n")


ROUTES = [
    Route("/hello", hello),
    Route("/slow", slow_answer),
    Route("/echo", echo, methods=["POST"]),
]


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer (its headers and its `content-length` bytes) from a kept-alive `sock`."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    length = int(parse(answer)[1]["content-length"])
    while len(answer.partition(b"\r\n\r\n")[2]) < length:
        answer += sock.recv(65536)
    return answer


def test_a_silent_connection_is_closed() -> None:
    with (
        served_http(routes=ROUTES, read_timeout_s=READ_TIMEOUT_S) as server,
        socket.create_connection((HOST, server.port)) as sock,
    ):
        took = closed_within(sock, PATIENCE_S)
    assert took is not None, "a connection that sent nothing was kept open"
    assert READ_TIMEOUT_S * 0.8 <= took <= READ_TIMEOUT_S + 2


def test_headers_sent_a_byte_at_a_time_are_cut_off() -> None:
    headers = b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    with (
        served_http(routes=ROUTES, read_timeout_s=READ_TIMEOUT_S) as server,
        socket.create_connection((HOST, server.port)) as sock,
    ):
        took = closed_within(sock, PATIENCE_S, drip=headers)
    assert took is not None, "a client dripping its headers was kept connected"
    assert took <= READ_TIMEOUT_S + 2


def test_a_body_sent_a_byte_at_a_time_is_cut_off() -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"
    with (
        served_http(routes=ROUTES, read_timeout_s=READ_TIMEOUT_S) as server,
        socket.create_connection((HOST, server.port)) as sock,
    ):
        sock.sendall(head)
        took = closed_within(sock, PATIENCE_S, drip=b"b" * 1000)
    assert took is not None, "a client dripping its body was kept connected"
    assert took <= READ_TIMEOUT_S + 2


def test_a_request_read_in_time_is_answered_however_long_the_answer_takes() -> None:
    with (
        served_http(routes=ROUTES, read_timeout_s=READ_TIMEOUT_S) as server,
        socket.create_connection((HOST, server.port), timeout=10) as sock,
    ):
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = read_answer(sock)
        # The same connection, kept alive, gets the whole time again for its next request.
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\n")
        sock.sendall(b"abc")
        second = read_answer(sock)
    assert parse(first)[0] == 200
    assert first.endswith(b"late but whole\n")
    assert parse(second)[0] == 200
    assert second.endswith(b"3 bytes\n")
