"""The arena's web pages: the arena, an agent's page and a cycle's page, rendered on the server.

This module owns the pages' routes (`page_routes`), their rendering and the headers they are sent
with. Templates are Jinja2 files of this package, loaded with autoescape on for every template,
so any text an agent wrote (order reasons, reasoning, tool results) is sent as inert text; no
template marks agent text safe. Every page carries a Content-Security-Policy allowing only this
origin's own files and no inline script or style, so even a missed escape could run nothing. The
pages are read-only (GET and HEAD) and read the ledger through `ops.web.read_model` in Starlette's
thread pool (never on the event loop of a daemon serving them). Live updates: each page names
`/live/stamp`, a few index lookups that change whenever a cycle, order, trace entry or NAV
snapshot is written or a cycle finishes, and the vendored `static/live.js` polls it and swaps in
the page's fresh `<main>` when it changes. Static files come from this package's `static/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jinja2 import Environment, PackageLoader, StrictUndefined
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from openbell.markets.errors import ReportError, TraceNotFound
from openbell.ops.return_metrics import NavPoint
from openbell.ops.web import read_model, views
from openbell.store import queries
from openbell.store.queries import AccountInfo
from openbell.store.records import SnapshotKind

#: The headers of every page: only this origin's files, no inline script or style, no framing.
PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: How many of an account's latest orders and cycles its page lists.
RECENT = 25


def template_environment() -> Environment:
    """The pages' Jinja2 environment: this package's templates, autoescape on for all of them."""
    return Environment(
        loader=PackageLoader("openbell.ops.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        auto_reload=False,
    )


def sparkline_series(engine: Engine, accounts: Sequence[AccountInfo]) -> dict[str, list[NavPoint]]:
    """Each account's NAV at its session closes (its slot NAVs when it has fewer than two), by
    agent name: the arena's sparklines."""
    ids = [info.account_id for info in accounts]
    closes = queries.nav_series_of(engine, ids, SnapshotKind.CLOSE)
    short = [account_id for account_id in ids if len(closes[account_id]) < 2]
    slots = queries.nav_series_of(engine, short, SnapshotKind.SLOT) if short else {}
    out: dict[str, list[NavPoint]] = {}
    for info in accounts:
        rows = slots.get(info.account_id) or closes[info.account_id]
        out[info.agent_name] = [NavPoint(at=r.at, nav=r.nav) for r in rows if r.nav > 0]
    return out


class _Pages:
    """The page endpoints over one engine. Plain functions: Starlette runs them in its thread
    pool, so the ledger's blocking reads never hold an event loop."""

    def __init__(self, engine: Engine, poll_ms: int) -> None:
        self._engine = engine
        self._poll_ms = poll_ms
        self._templates = template_environment()

    def _render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        stamp = queries.progress_stamp(self._engine)
        body = self._templates.get_template(name).render(
            stamp=stamp, poll_ms=self._poll_ms, **context
        )
        return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)

    def _missing(self, message: str) -> HTMLResponse:
        return self._render("missing.html", status=404, message=message)

    def arena(self, request: Request) -> Response:
        boards: list[views.ArenaBoard] = []
        accounts = queries.accounts(self._engine)
        for summary in read_model.markets(self._engine):
            board = read_model.leaderboard(self._engine, summary.market)
            found = [info for info in accounts if info.market == summary.market]
            navs = sparkline_series(self._engine, found)
            boards.append(views.arena_board(summary, board, navs))
        return self._render("arena.html", boards=boards)

    def agent(self, request: Request) -> Response:
        market = str(request.path_params["market"])
        agent = str(request.path_params["agent"])
        try:
            found = read_model.metrics(self._engine, agent, market)
            holdings = read_model.positions(self._engine, agent, market)
            orders = read_model.orders(self._engine, agent, market, limit=RECENT)
            cycles = read_model.cycles(self._engine, agent, market, limit=RECENT)
        except ReportError:
            return self._missing(f"No agent {agent!r} in market {market!r}.")
        view = views.agent_view(found, holdings, orders.items, cycles.items)
        return self._render("agent.html", agent=view)

    def cycle(self, request: Request) -> Response:
        cycle_id = int(request.path_params["cycle_id"])
        try:
            found = read_model.cycle(self._engine, cycle_id)
        except TraceNotFound:
            return self._missing(f"No cycle {cycle_id}.")
        return self._render("cycle.html", cycle=views.cycle_view(found))

    def stamp(self, request: Request) -> Response:
        return PlainTextResponse(
            queries.progress_stamp(self._engine), headers={"Cache-Control": "no-store"}
        )


def page_routes(engine: Engine, *, poll_interval_s: float = 5.0) -> list[BaseRoute]:
    """The pages' routes over `engine`: `/`, `/markets/{market}/agents/{agent}`,
    `/cycles/{cycle_id}`, `/live/stamp` and `/static`; live pages poll every `poll_interval_s`."""
    pages = _Pages(engine, poll_ms=round(poll_interval_s * 1000))
    return [
        Route("/", pages.arena, methods=["GET"], name="arena"),
        Route("/markets/{market}/agents/{agent}", pages.agent, methods=["GET"], name="agent"),
        Route("/cycles/{cycle_id:int}", pages.cycle, methods=["GET"], name="cycle"),
        Route("/live/stamp", pages.stamp, methods=["GET"], name="live_stamp"),
        # The strict editable install links each file into build/: follow the links (the path
        # is still checked to stay inside the directory).
        Mount(
            "/static",
            app=StaticFiles(packages=[("openbell.ops.web", "static")], follow_symlink=True),
            name="static",
        ),
    ]
