"""`/healthz` of `openbell serve`: whether the server can read its ledger, and whether a daemon
writes it.

This module owns `serve_health_routes`. `openbell serve` runs no daemon, so its health is not the
daemon's `HealthBoard` (`daemon.http.health_routes`): it answers 200 with `{"status": "ok",
"role": "serve", "daemon_writes": ..., "markets": {market: last_slot_at}}` when the ledger
answers a read (the markets and their latest slot, in Starlette's thread pool), and 503 with
`{"status": "unavailable", "role": "serve", "error": ...}` (the error's class only: no path or
URL) when it does not. GET and HEAD only; it is an open route (no read token), like the daemon's,
for probes that hold none, and it shows nothing an agent wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from openbell.ops.web import read_model


def serve_health_routes(engine: Engine, daemon_writes: Callable[[], bool]) -> list[BaseRoute]:
    """`/healthz` over the ledger of `engine`; `daemon_writes` says whether a daemon writes it."""

    def read() -> tuple[int, dict[str, Any]]:
        try:
            found = read_model.markets(engine)
        except SQLAlchemyError as exc:
            return 503, {"status": "unavailable", "role": "serve", "error": type(exc).__name__}
        markets = {
            m.market: None if m.last_slot_at is None else m.last_slot_at.isoformat() for m in found
        }
        body = {"status": "ok", "role": "serve", "daemon_writes": daemon_writes()}
        return 200, {**body, "markets": markets}

    async def healthz(_request: Request) -> Response:
        status, body = await run_in_threadpool(read)
        return Response(json.dumps(body) + "\n", status_code=status, media_type="application/json")

    return [Route("/healthz", healthz, methods=["GET", "HEAD"])]
