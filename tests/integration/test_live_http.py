"""The live daemon's HTTP server: health and metrics beside the routes the plan's `web` factory
builds over the daemon's own engine, behind the read token, with their lifespan entered while the
daemon runs and exited when it stops."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta

import httpx
from sqlalchemy import Engine, text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openbell.daemon.clock import ScaledClock
from openbell.daemon.http import HealthView, WebParts
from openbell_testkit.live import START_AT, crypto_plan, migrated, running
from openbell_testkit.offline import closed_port

TOKEN = "live-read-token-0123456789"  # noqa: S105 (a test token)


def get(url: str, **headers: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, headers=headers, timeout=5)
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_the_daemon_serves_the_ops_routes_over_its_engine_behind_the_token(
    sqlite_url: str,
) -> None:
    events: list[str] = []

    def web(engine: Engine, _health: HealthView) -> WebParts:
        async def accounts(_request: Request) -> Response:
            with engine.connect() as connection:
                count = connection.execute(text("SELECT count(*) FROM account")).scalar_one()
            return JSONResponse({"accounts": count})

        @asynccontextmanager
        async def lifespan() -> AsyncIterator[None]:
            events.append("entered")
            yield
            events.append("exited")

        return WebParts(routes=[Route("/api/v1/accounts", accounts)], lifespans=[lifespan])

    port = closed_port()
    plan = replace(
        crypto_plan(migrated(sqlite_url)),
        http_listen=("127.0.0.1", port),
        http_read_token=TOKEN,
        web=web,
    )
    base = f"http://127.0.0.1:{port}"
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=1.0)
    with running(plan, clock):
        health = get(f"{base}/healthz")
        metrics = get(f"{base}/metrics")
        bare = get(f"{base}/api/v1/accounts")
        read = get(f"{base}/api/v1/accounts", Authorization=f"Bearer {TOKEN}")
        during = list(events)
    assert (health.status_code, health.json()["status"]) == (200, "ok")
    assert metrics.status_code == 200
    assert bare.status_code == 401
    assert (read.status_code, read.json()) == (200, {"accounts": 2})
    assert during == ["entered"]
    assert events == ["entered", "exited"]
    assert TOKEN not in repr(plan)
