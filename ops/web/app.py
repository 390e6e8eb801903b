"""The arena's web routes over a ledger: what the daemon's server and `openbell serve` mount.

This module owns `web_routes(engine)`, the read routes of the arena (the JSON API under
`/api/v1` and the pages), which `daemon.http.serve_http` puts behind the read token, and
`web_parts(engine)`, the daemon's `LivePlan.web` factory: those routes, plus the routes with their
own authentication (`/mcp`) and the lifespans they need. Every route only reads the ledger.
"""

from __future__ import annotations

from sqlalchemy import Engine
from starlette.routing import BaseRoute

from openbell.daemon.http import WebParts
from openbell.ops.web.api import api_routes
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.pages import page_routes


def web_routes(engine: Engine) -> list[BaseRoute]:
    """The arena's read routes over the ledger of `engine`: the JSON API, then the pages, sharing
    one memo (each leaderboard is computed once a slot for both)."""
    memo = ViewMemo(engine)
    return [*api_routes(engine, memo=memo), *page_routes(engine, memo=memo)]


def web_parts(engine: Engine) -> WebParts:
    """What the live daemon mounts into its server over its engine."""
    return WebParts(routes=web_routes(engine))
