"""The daemon's HTTP server for real: uvicorn on a loopback port, spoken to with httpx.

`/healthz` keeps its codes (200, 503 when a market is overdue) and `/metrics` parses with
prometheus_client's parser; only GET and HEAD are allowed there, unknown paths are 404. A
non-loopback address is refused, a port in use is one clear error. With a read token the read
routes need it (bearer, or a cookie set from `?token=`; a websocket is closed without it), health
and metrics stay open. Lifespans are entered before the first request and exited after `close()`,
in the server's own task.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from openbell.daemon.health import HealthBoard, MarketWatch
from openbell.daemon.http import TOKEN_COOKIE, HttpServer, build_app, health_routes, serve_http
from openbell.daemon.runner import CycleOutcome, SlotReport
from openbell.markets.errors import ConfigError, OperatorError
from openbell.store.records import CycleStatus
from openbell_testkit.offline import sync

DAY = timedelta(days=1)
TUESDAY = datetime(2026, 12, 1, tzinfo=UTC)
TOKEN = "a-read-token-of-some-length"  # noqa: S105 (a test token)


def midnight_at_or_before(_market: str, at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def midnight_after(market: str, at: datetime) -> datetime:
    return midnight_at_or_before(market, at) + DAY


def crypto_board() -> HealthBoard:
    watch = MarketWatch(cadence=DAY, grace=timedelta(hours=1), since=TUESDAY)
    board = HealthBoard({"crypto": watch}, midnight_at_or_before, midnight_after)
    outcome = CycleOutcome(account_id=1, agent="cash", cycle_id=1, status=CycleStatus.DONE)
    report = SlotReport(market="crypto", slot_at=TUESDAY, outcomes=(outcome,))
    board.slot_finished(report, rejections=2, latency_s=0.25)
    return board


async def hello(_request: Request) -> Response:
    return PlainTextResponse("hello\n")


READ_ROUTES: list[BaseRoute] = [Route("/api/v1/hello", hello)]


@sync
async def test_healthz_keeps_its_codes_and_metrics_parse() -> None:
    board = crypto_board()
    now = [TUESDAY + timedelta(hours=2)]
    server = await serve_http("127.0.0.1", 0, open_routes=health_routes(board, lambda: now[0]))
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            healthy = await client.get("/healthz")
            now[0] = TUESDAY + DAY + timedelta(hours=2)  # the Wednesday slot never ran
            overdue = await client.get("/healthz")
            metrics = await client.get("/metrics")
            head = await client.head("/metrics")
            post = await client.post("/healthz")
            unknown = await client.get("/nothing")
    finally:
        await server.close()
    assert healthy.status_code == 200
    assert healthy.json()["status"] == "ok"
    assert healthy.headers["content-type"] == "application/json"
    assert overdue.status_code == 503
    assert overdue.json()["overdue"] == {"crypto": (TUESDAY + DAY).isoformat()}
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(metrics.text)}
    done = [
        s.value
        for s in families["openbell_cycles"].samples
        if s.name == "openbell_cycles_total" and s.labels == {"market": "crypto", "status": "done"}
    ]
    assert done == [1.0]
    assert (head.status_code, head.content) == (200, b"")
    assert post.status_code == 405
    assert unknown.status_code == 404


@sync
async def test_a_non_loopback_address_is_refused_unless_allowed() -> None:
    with pytest.raises(ConfigError, match=r"'0\.0\.0\.0' is not a loopback address"):
        await serve_http("0.0.0.0", 0, allow_remote=False)  # noqa: S104
    server = await serve_http("0.0.0.0", 0, routes=READ_ROUTES, allow_remote=True)  # noqa: S104
    try:
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{server.port}/api/v1/hello")
    finally:
        await server.close()
    assert answer.text == "hello\n"


@sync
async def test_a_port_in_use_is_one_clear_error() -> None:
    first = await serve_http("127.0.0.1", 0)
    try:
        with pytest.raises(OperatorError, match=rf"127\.0\.0\.1:{first.port}: cannot listen there"):
            await serve_http("127.0.0.1", first.port)
    finally:
        await first.close()


@sync
async def test_the_read_token_guards_the_read_routes_but_not_health() -> None:
    board = crypto_board()
    server = await serve_http(
        "127.0.0.1",
        0,
        routes=READ_ROUTES,
        open_routes=health_routes(board, lambda: TUESDAY + timedelta(hours=2)),
        read_token=TOKEN,
    )
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            bare = await client.get("/api/v1/hello")
            wrong = await client.get("/api/v1/hello", headers={"Authorization": "Bearer nope"})
            bearer = await client.get("/api/v1/hello", headers={"Authorization": f"Bearer {TOKEN}"})
            unknown = await client.get("/nothing", headers={"Authorization": f"Bearer {TOKEN}"})
            health = await client.get("/healthz")
            metrics = await client.get("/metrics")
            link = await client.get(f"/api/v1/hello?x=1&token={TOKEN}")
        async with httpx.AsyncClient(base_url=server.url, follow_redirects=True) as browser:
            followed = await browser.get(f"/api/v1/hello?token={TOKEN}")
            again = await browser.get("/api/v1/hello")
    finally:
        await server.close()
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in bare.text
    assert wrong.status_code == 401
    assert (bearer.status_code, bearer.text) == (200, "hello\n")
    assert unknown.status_code == 404
    assert (health.status_code, metrics.status_code) == (200, 200)
    # A link with the token: a redirect to the same URL without it, and the token in a cookie.
    assert link.status_code == 303
    assert link.headers["location"] == "/api/v1/hello?x=1"
    cookie = link.headers["set-cookie"]
    assert cookie.startswith(f"{TOKEN_COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert (followed.status_code, followed.text, str(followed.url)) == (
        200,
        "hello\n",
        f"{server.url}/api/v1/hello",
    )
    assert again.status_code == 200  # the cookie alone


@sync
async def test_lifespans_run_in_the_servers_task_around_serving() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def task_group() -> AsyncIterator[None]:
        # As the MCP session manager does: an anyio task group, entered and exited in one task.
        async with anyio.create_task_group() as group:
            events.append("entered")
            group.start_soon(anyio.sleep_forever)
            yield
            group.cancel_scope.cancel()
        events.append("exited")

    async def probe(_request: Request) -> Response:
        return PlainTextResponse(",".join(events))

    server = await serve_http(
        "127.0.0.1", 0, routes=[Route("/probe", probe)], lifespans=[task_group]
    )
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            seen = (await client.get("/probe")).text
    finally:
        await server.close()
    assert seen == "entered"
    assert events == ["entered", "exited"]


@sync
async def test_a_lifespan_that_fails_to_enter_fails_the_start() -> None:
    @asynccontextmanager
    async def broken() -> AsyncIterator[None]:
        raise RuntimeError("session manager cannot start")
        yield

    with pytest.raises(RuntimeError, match="session manager cannot start"):
        await serve_http("127.0.0.1", 0, lifespans=[broken])


@sync
async def test_close_ends_a_stream_that_never_ends_within_the_grace() -> None:
    async def forever() -> AsyncIterator[bytes]:
        while True:
            yield b"data: tick\n\n"
            await asyncio.sleep(0.05)

    async def events(_request: Request) -> Response:
        return StreamingResponse(forever(), media_type="text/event-stream")

    server = await serve_http("127.0.0.1", 0, routes=[Route("/events", events)])
    async with (
        httpx.AsyncClient(base_url=server.url) as client,
        client.stream("GET", "/events") as stream,
    ):
        first = await anext(stream.aiter_lines())
        started = asyncio.get_running_loop().time()
        await server.close()
        elapsed = asyncio.get_running_loop().time() - started
    assert first == "data: tick"
    assert elapsed < 5.0


def test_uvicorn_leaves_the_signal_handlers_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)

    async def serve_once() -> HttpServer:
        server = await serve_http("127.0.0.1", 0)
        during = signal.getsignal(signal.SIGTERM)
        await server.close()
        assert during is before
        return server

    asyncio.run(serve_once())
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_websocket_needs_the_read_token_too() -> None:
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("open")
        await websocket.close()

    app = build_app(routes=[WebSocketRoute("/api/v1/live", echo)], read_token=TOKEN)
    client = TestClient(app)
    with pytest.raises(WebSocketDisconnect) as refused, client.websocket_connect("/api/v1/live"):
        pass
    assert refused.value.code == 1008
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with client.websocket_connect("/api/v1/live", headers=headers) as websocket:
        assert websocket.receive_text() == "open"
