"""The arena's web pages: the arena, a market's page, an agent's page and a cycle's page, rendered
on the server.

This module owns the pages' routes (`page_routes`), their rendering and the headers they are sent
with. Templates are Jinja2 files of this package, loaded with autoescape on for every template,
so any text an agent wrote (order reasons, reasoning, tool results) is sent as inert text; no
template marks agent text safe. Every page carries a Content-Security-Policy allowing only this
origin's own files and no inline script or style, so even a missed escape could run nothing. The
pages are read-only (GET and HEAD) and read the ledger through `ops.web.read_model` in Starlette's
thread pool (never on the event loop of a daemon serving them), with leaderboards and reports
kept between slots by a `ViewMemo` and the arena's boards by the ledger's version. Live updates:
each page names `/live/stamp`, the ledger's version (`store.queries.ledger_version`: index
lookups that change when a slot writes to the ledger or a cycle finishes), and the vendored
`static/live.js` polls it and swaps in the page's fresh `<main>` when it changes. Static files
come from this package's `static/`. An agent's page also shows its factor attribution over the
whole ledger (`ops.web.attribution_view`), kept by the memo too; none while it has fewer than two
slot snapshots. Served by a daemon, the arena shows its last-bell panel (`ops.web.last_bell`:
each market's slot in progress or last slot's outcome, and the next bell). A page whose market
views cannot be computed (the view worker of `ops.web.view_worker` keeps dying) is a 503 page
saying so. Each board shows its significance suite (`ops.web.significance_view`: the deflated
Sharpe, the Holm-adjusted p-value against the best baseline and the immature mark, as `openbell
leaderboard --wide`), computed once per ledger version with the board. The arena names the
ledger's current season and its manifest hash, linking to the season's page: its methods card
(`ops.seasons.card`). The header shows "live" only while a daemon writes the ledger
(`Liveness`), "read-only ledger" otherwise; `?spark=shared` draws a board's sparklines on one
scale, so their heights compare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from jinja2 import Environment, PackageLoader, StrictUndefined
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from openbell.daemon.http import HealthView
from openbell.markets.errors import ReportError, SeasonError, TraceNotFound
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.evaluation.significance import BoardSignificance
from openbell.ops.reports.contamination import SlotsView
from openbell.ops.reports.market_reports import Leaderboard
from openbell.ops.web import read_model, views
from openbell.ops.web.attribution_view import AttributionView, attribution_view
from openbell.ops.web.last_bell import last_bell_rows
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.view_worker import ViewWorkerFailed
from openbell.store import queries
from openbell.store.seasons import current_season

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
#: How many of an account's latest orders, fills and cycles its page lists.
RECENT = 25


def template_environment() -> Environment:
    """The pages' Jinja2 environment: this package's templates, autoescape on for all of them."""
    return Environment(
        loader=PackageLoader("openbell.ops.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        auto_reload=False,
    )


#: Whether a daemon writes the ledger the pages show, asked at each page: the daemon's own
#: server says yes; `openbell serve` asks the ledger's lock (`daemon.locks.daemon_writes`).
Liveness = Callable[[], bool]
#: The `spark` query value that draws a board's sparklines on one shared scale.
SHARED_SCALE = "shared"


def _read_only() -> bool:
    return False


#: What the arena keeps between requests of one ledger version: each market's summary, board, NAV
#: curves and significance suite (the views are built per request: the sparklines' scale is the
#: visitor's choice).
_ArenaInputs = list[
    tuple[
        read_model.MarketSummary,
        Leaderboard,
        Mapping[str, Sequence[NavPoint]],
        BoardSignificance,
    ]
]


class _Pages:
    """The page endpoints over one engine. Plain functions: Starlette runs them in its thread
    pool, so the ledger's blocking reads never hold an event loop."""

    def __init__(
        self,
        engine: Engine,
        memo: ViewMemo,
        poll_ms: int,
        live: Liveness,
        health: HealthView | None = None,
    ) -> None:
        self._engine = engine
        self._health = health
        self._memo = memo
        self._poll_ms = poll_ms
        self._live = live
        self._templates = template_environment()
        self._arena: tuple[tuple[str, SlotsView], _ArenaInputs] | None = None

    def _stamp(self) -> str:
        return stamp_of(queries.ledger_version(self._engine))

    def _render(self, name: str, stamp: str, status: int = 200, **context: Any) -> HTMLResponse:
        body = self._templates.get_template(name).render(
            stamp=stamp, poll_ms=self._poll_ms, live=self._live(), **context
        )
        return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)

    def _missing(self, stamp: str, message: str) -> HTMLResponse:
        return self._render("missing.html", stamp, status=404, message=message)

    def _unavailable(self, stamp: str, exc: ViewWorkerFailed) -> HTMLResponse:
        return self._render("unavailable.html", stamp, status=503, message=str(exc))

    def _arena_inputs(self, stamp: str, slots: SlotsView = "post-cutoff") -> _ArenaInputs:
        """Every market's summary, board (the post-cutoff headline, or every slot) and curves at
        ledger version `stamp` (kept until the ledger changes)."""
        cached = self._arena
        if cached is not None and cached[0] == (stamp, slots):
            return cached[1]
        found: _ArenaInputs = []
        for summary in read_model.markets(self._engine):
            board = read_model.leaderboard(
                self._engine, summary.market, memo=self._memo, slots=slots
            )
            curves = read_model.equity_curves(self._engine, summary.market, memo=self._memo)
            suite = read_model.significance(self._engine, summary.market, memo=self._memo)
            found.append((summary, board, curves, suite))
        self._arena = ((stamp, slots), found)
        return found

    def arena(self, request: Request) -> Response:
        return self._boards(request, market=None)

    def market(self, request: Request) -> Response:
        return self._boards(request, market=str(request.path_params["market"]))

    def _boards(self, request: Request, market: str | None) -> Response:
        """The arena page: every market's board, or `market`'s alone (a 404 without one)."""
        stamp = self._stamp()
        shared = request.query_params.get("spark") == SHARED_SCALE
        slots: SlotsView = "all" if request.query_params.get("slots") == "all" else "post-cutoff"
        try:
            inputs = self._arena_inputs(stamp, slots)
        except ViewWorkerFailed as exc:
            return self._unavailable(stamp, exc)
        boards = [
            views.arena_board(summary, board, curves, shared_scale=shared, significance=suite)
            for summary, board, curves, suite in inputs
            if market is None or summary.market == market
        ]
        if market is not None and not boards:
            return self._missing(stamp, f"No accounts in market {market!r}.")
        return self._render(
            "arena.html",
            stamp,
            boards=boards,
            market=None if market is None else views.market_title(market),
            shared_scale=shared,
            here=request.url.path,
            bells=None if self._health is None else last_bell_rows(self._health()),
            season=current_season(self._engine),
        )

    def agent(self, request: Request) -> Response:
        market = str(request.path_params["market"])
        agent = str(request.path_params["agent"])
        stamp = self._stamp()
        try:
            found = read_model.metrics(self._engine, agent, market, memo=self._memo)
            holdings = read_model.positions(self._engine, agent, market)
            orders = read_model.orders(self._engine, agent, market, limit=RECENT)
            fills = read_model.fills(self._engine, agent, market, limit=RECENT)
            cycles = read_model.cycles(self._engine, agent, market, limit=RECENT)
            attribution = self._attribution(agent, market)
        except ReportError:
            return self._missing(stamp, f"No agent {agent!r} in market {market!r}.")
        except ViewWorkerFailed as exc:
            return self._unavailable(stamp, exc)
        view = views.agent_view(found, holdings, orders.items, fills.items, cycles.items)
        return self._render("agent.html", stamp, agent=view, attribution=attribution)

    def _attribution(self, agent: str, market: str) -> AttributionView | None:
        """The agent's attribution section, or None while it has fewer than two snapshots."""
        try:
            found = read_model.attribution(self._engine, agent, market, memo=self._memo)
        except ReportError:
            return None
        return attribution_view(found)

    def cycle(self, request: Request) -> Response:
        cycle_id = int(request.path_params["cycle_id"])
        stamp = self._stamp()
        try:
            found = read_model.cycle(self._engine, cycle_id)
        except TraceNotFound:
            return self._missing(stamp, f"No cycle {cycle_id}.")
        return self._render("cycle.html", stamp, cycle=views.cycle_view(found))

    def season(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        stamp = self._stamp()
        try:
            season, card = read_model.season_card(self._engine, name)
        except SeasonError:
            return self._missing(stamp, f"No season {name!r}.")
        return self._render("season.html", stamp, season=season, card=card)

    def stamp(self, request: Request) -> Response:
        return PlainTextResponse(self._stamp(), headers={"Cache-Control": "no-store"})


def stamp_of(version: tuple[int, ...]) -> str:
    """The ledger's version (`store.queries.ledger_version`) as the live pages' stamp."""
    return "-".join(str(part) for part in version)


def page_routes(
    engine: Engine,
    *,
    memo: ViewMemo | None = None,
    poll_interval_s: float = 5.0,
    live: Liveness = _read_only,
    health: HealthView | None = None,
) -> list[BaseRoute]:
    """The pages' routes over `engine`: `/`, `/markets/{market}`,
    `/markets/{market}/agents/{agent}`, `/cycles/{cycle_id}`, `/seasons/{name}`, `/live/stamp`
    and `/static`; live pages poll every `poll_interval_s`.

    `memo` keeps leaderboards and reports between slots (pass the JSON API's to share it; a new
    one by default). `live` says whether a daemon writes the ledger: the header's "live" mark is
    shown only then (default: never, a read-only ledger). `health` is the daemon's `/healthz`
    body, for the arena's last-bell panel (`ops.web.last_bell`; None: no panel).
    """
    pages = _Pages(
        engine,
        memo or ViewMemo(engine),
        poll_ms=round(poll_interval_s * 1000),
        live=live,
        health=health,
    )
    return [
        Route("/", pages.arena, methods=["GET"], name="arena"),
        Route("/markets/{market}", pages.market, methods=["GET"], name="market"),
        Route("/markets/{market}/agents/{agent}", pages.agent, methods=["GET"], name="agent"),
        Route("/cycles/{cycle_id:int}", pages.cycle, methods=["GET"], name="cycle"),
        Route("/seasons/{name}", pages.season, methods=["GET"], name="season"),
        Route("/live/stamp", pages.stamp, methods=["GET"], name="live_stamp"),
        # The strict editable install links each file into build/: follow the links (the path
        # is still checked to stay inside the directory).
        Mount(
            "/static",
            app=StaticFiles(packages=[("openbell.ops.web", "static")], follow_symlink=True),
            name="static",
        ),
    ]
