"""The read-only JSON API under `/api/v1`: Starlette routes over the read model.

This module owns the API's URLs, its query parsing and its errors. `api_routes(engine)` returns
one `Mount` at `/api/v1` holding a small Starlette app, which the daemon's server and
`openbell serve` put among their own routes. Every endpoint answers GET (and HEAD); any other
method is a 405. Query parameters are validated by `ops.web.schemas` (a bad one is a 400); an
unknown market, agent or cycle is a 404; both, and any unknown path under `/api/v1`, answer
`{"error": {"code", "message"}}`. The ledger is read in Starlette's thread pool (the engine is
synchronous), so a slow query never blocks the event loop; leaderboards, metric panels and
benchmark series come from a `ViewMemo` (the server's, shared with its pages, or the app's own),
computed again only after their market's version changed (`store.queries.market_version`: a slot
of another market leaves them be; a strategy-code agent's concordance is read at each request: a
judge's verdict changes it without a slot). Routes:

    GET /api/v1/markets
    GET /api/v1/leaderboard/{market}?window=all|Nd&start=&end=&slots=post-cutoff|all&season=
    GET /api/v1/leaderboard/{market}/significance?window=&start=&end=
    GET /api/v1/agents/{agent}/{market}
    GET /api/v1/agents/{agent}/{market}/nav?window=&start=&end=
    GET /api/v1/agents/{agent}/{market}/benchmark?window=&start=&end=
    GET /api/v1/agents/{agent}/{market}/metrics?window=&start=&end=
    GET /api/v1/agents/{agent}/{market}/attribution?window=&start=&end=
    GET /api/v1/agents/{agent}/{market}/concordance
    GET /api/v1/agents/{agent}/{market}/positions
    GET /api/v1/agents/{agent}/{market}/orders?limit=&before=ORDER_ID
    GET /api/v1/agents/{agent}/{market}/fills?limit=&before=FILL_ID
    GET /api/v1/agents/{agent}/{market}/cycles?limit=&before=SLOT_AT
    GET /api/v1/seasons
    GET /api/v1/seasons/{name}
    GET /api/v1/cycles/{cycle_id}
    GET /api/v1/openapi.json

A leaderboard names the ledger's current season (`season`: its name, window and manifest hash;
null without one), or `?season=NAME` (which also ranks over that season's window unless a
window is given; an unknown one is a 404), read at each request: opening a season writes no
slot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from openbell.markets.errors import ReportError, SeasonError, TraceNotFound
from openbell.ops.evaluation.attribution.output import attribution_record
from openbell.ops.evaluation.concordance.record import (
    STRATEGY_CODE_KIND,
    strategy_entry,
    strategy_scores,
    summary_entry,
)
from openbell.ops.reports import exporting
from openbell.ops.reports.board_significance import report_fields, significance_record
from openbell.ops.reports.contamination import CutoffSettings
from openbell.ops.seasons.opening import season_record
from openbell.ops.web import payloads, read_model
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.openapi import openapi_document, route_index
from openbell.ops.web.read_model import Window
from openbell.ops.web.schemas import (
    CycleQuery,
    IdPageQuery,
    LeaderboardQuery,
    SlotPageQuery,
    WindowQuery,
)
from openbell.ops.web.view_worker import ViewWorkerFailed

PREFIX = "/api/v1"
_Query = TypeVar("_Query", bound=BaseModel)


_Build = Callable[[], dict[str, Any]]


class BadRequest(Exception):
    """A query parameter the API cannot use; answered with a 400."""


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """The API's error document with `status`."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _query(model: type[_Query], request: Request, values: dict[str, Any] | None = None) -> _Query:
    try:
        return model.model_validate(dict(request.query_params) if values is None else values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'query'}: {error['msg']}"
            for error in exc.errors()
        )
        raise BadRequest(problems) from None


def _window(engine: Engine, market: str, query: WindowQuery) -> Window:
    """The query's window as `[start, end)` instants, as the CLI turns `--start`/`--end`."""
    days = query.days
    if days is not None:
        last = {found.market: found.last_slot_at for found in read_model.markets(engine)}
        if market not in last:
            raise ReportError(f"no accounts in market {market!r} in the ledger")
        last_at = last[market]
        return read_model.ALL_TIME if last_at is None else read_model.trailing_window(last_at, days)
    start = None if query.start is None else datetime.combine(query.start, datetime.min.time(), UTC)
    end = (
        None
        if query.end is None
        else datetime.combine(query.end, datetime.min.time(), UTC) + timedelta(days=1)
    )
    return start, end


def _with_season(board: bytes, season: dict[str, Any] | None) -> bytes:
    """A board's JSON text (an object) with `season` as its first member."""
    mark = json.dumps(season, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b'{"season":' + mark + (b"," if board[1:2] != b"}" else b"") + board[1:]


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _next_url(request: Request, before: object | None) -> str | None:
    if before is None:
        return None
    params = dict(request.query_params)
    params["before"] = before.isoformat() if isinstance(before, datetime) else str(before)
    return f"{request.url.path}?{urlencode(params)}"


class _Api:
    """The endpoints over one engine."""

    def __init__(self, engine: Engine, memo: ViewMemo) -> None:
        self._engine = engine
        self._memo = memo

    async def markets(self, request: Request) -> Response:
        found = await run_in_threadpool(read_model.markets, self._engine)
        return JSONResponse(payloads.markets_document(found))

    async def leaderboard(self, request: Request) -> Response:
        market = request.path_params["market"]
        chosen = request.query_params.get("season")
        values = {k: v for k, v in request.query_params.items() if k != "season"}
        query = _query(LeaderboardQuery, request, values)

        def read() -> bytes:
            season = read_model.board_season(self._engine, chosen)
            whole = query.window == "all" and query.start is None and query.end is None
            window: Window
            if chosen is not None and season is not None and whole:
                window = (season.start_at, season.end_at)
            else:
                window = _window(self._engine, market, query)
            board = self._rendered(
                market,
                ("leaderboard", market, *window, query.slots),
                lambda: exporting.leaderboard_record(
                    read_model.leaderboard(
                        self._engine, market, window, memo=self._memo, slots=query.slots
                    )
                ),
            )
            return _with_season(board, None if season is None else season_record(season))

        return _json(await run_in_threadpool(read))

    async def seasons(self, request: Request) -> Response:
        found = await run_in_threadpool(read_model.seasons_document, self._engine)
        return JSONResponse(found)

    async def season(self, request: Request) -> Response:
        name = request.path_params["name"]
        found = await run_in_threadpool(read_model.season_document, self._engine, name)
        return JSONResponse(found)

    async def significance(self, request: Request) -> Response:
        market = request.path_params["market"]
        query = _query(WindowQuery, request)

        def read() -> bytes:
            window = _window(self._engine, market, query)
            return self._rendered(
                market,
                ("significance", market, *window),
                lambda: significance_record(
                    read_model.significance(self._engine, market, window, memo=self._memo)
                ),
            )

        return _json(await run_in_threadpool(read))

    def _rendered(
        self, market: str, key: tuple[str | datetime | None, ...], build: _Build
    ) -> bytes:
        """The JSON text of `build()`'s document of `market`, kept in the memo under `key` until
        that market's version changes (a slot of another market leaves it be): a year of NAV
        points takes longer to write out than to read."""
        return self._memo.remember(
            bytes, ("json", *key), lambda: bytes(JSONResponse(build()).body), market=market
        )

    async def account(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]
        info = await run_in_threadpool(read_model.account, self._engine, agent, market)
        base = f"{PREFIX}/agents/{quote(agent, safe='')}/{quote(market, safe='')}"
        links = {
            name: f"{base}/{name}"
            for name in (
                *("nav", "benchmark", "metrics", "attribution", "concordance"),
                *("positions", "orders", "fills", "cycles"),
            )
        }
        return JSONResponse({"account": payloads.account_document(info), "links": links})

    async def nav(self, request: Request) -> Response:
        return await self._windowed(
            request,
            "nav",
            lambda agent, market, window: payloads.nav_document(
                read_model.nav_series(self._engine, agent, market, window)
            ),
        )

    async def benchmark(self, request: Request) -> Response:
        return await self._windowed(
            request,
            "benchmark",
            lambda agent, market, window: payloads.benchmark_document(
                read_model.benchmark(self._engine, agent, market, window, memo=self._memo)
            ),
        )

    async def metrics(self, request: Request) -> Response:
        return await self._windowed(
            request,
            "metrics",
            lambda agent, market, window: {
                **exporting.report_record(
                    read_model.metrics(self._engine, agent, market, window, memo=self._memo)
                ),
                **report_fields(
                    read_model.significance(self._engine, market, window, memo=self._memo), agent
                ),
            },
        )

    async def attribution(self, request: Request) -> Response:
        return await self._windowed(
            request,
            "attribution",
            lambda agent, market, window: attribution_record(
                read_model.attribution(self._engine, agent, market, window, memo=self._memo)
            ),
        )

    async def concordance(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]

        def read() -> dict[str, Any]:
            info = read_model.account(self._engine, agent, market)
            scores = []
            if info.agent_kind == STRATEGY_CODE_KIND:
                found = read_model.metrics(self._engine, agent, market, memo=self._memo)
                factor = found.row.panel.periods_per_year
                scores = strategy_scores(self._engine, info.account_id, market, factor)
            return {
                "account": payloads.account_document(info),
                "strategies": [
                    {"strategy": index, **strategy_entry(score)}
                    for index, score in enumerate(scores, start=1)
                ],
                "summary": summary_entry(scores),
            }

        return JSONResponse(await run_in_threadpool(read))

    async def _windowed(
        self, request: Request, name: str, read: Callable[[str, str, Window], dict[str, Any]]
    ) -> Response:
        """An account's document `name` over the query's window (the account checked first, so
        an unknown agent is a 404 whatever the window), kept until the market's version changes."""
        agent, market = request.path_params["agent"], request.path_params["market"]
        query = _query(WindowQuery, request)

        def run() -> bytes:
            read_model.account(self._engine, agent, market)
            window = _window(self._engine, market, query)
            return self._rendered(
                market, (name, agent, market, *window), lambda: read(agent, market, window)
            )

        return _json(await run_in_threadpool(run))

    async def positions(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]
        found = await run_in_threadpool(read_model.positions, self._engine, agent, market)
        return JSONResponse(exporting.positions_record(found))

    async def orders(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]
        query = _query(IdPageQuery, request)
        page = await run_in_threadpool(
            lambda: read_model.orders(
                self._engine, agent, market, limit=query.limit, before=query.before
            )
        )
        return JSONResponse(payloads.orders_document(page, _next_url(request, page.next_before)))

    async def fills(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]
        query = _query(IdPageQuery, request)
        page = await run_in_threadpool(
            lambda: read_model.fills(
                self._engine, agent, market, limit=query.limit, before=query.before
            )
        )
        return JSONResponse(payloads.fills_document(page, _next_url(request, page.next_before)))

    async def cycles(self, request: Request) -> Response:
        agent, market = request.path_params["agent"], request.path_params["market"]
        query = _query(SlotPageQuery, request)
        before = None if query.before is None else query.before.astimezone(UTC)
        page = await run_in_threadpool(
            lambda: read_model.cycles(self._engine, agent, market, limit=query.limit, before=before)
        )
        return JSONResponse(payloads.cycles_document(page, _next_url(request, page.next_before)))

    async def cycle(self, request: Request) -> Response:
        cycle_id = _query(CycleQuery, request, request.path_params).cycle_id
        found = await run_in_threadpool(read_model.cycle, self._engine, cycle_id)
        return JSONResponse(payloads.cycle_document(found))

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def index(self, request: Request) -> Response:
        return JSONResponse(route_index())


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, "not_found", str(exc))


async def _unavailable(request: Request, exc: Exception) -> Response:
    return error_response(503, "unavailable", str(exc))


async def _bad_request(request: Request, exc: Exception) -> Response:
    return error_response(400, "bad_request", str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # noqa: S101 - registered for HTTPException only
    codes = {404: "not_found", 405: "method_not_allowed"}
    response = error_response(
        exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail)
    )
    if exc.status_code == 405:
        response.headers["Allow"] = "GET, HEAD"
    return response


def api_app(
    engine: Engine, *, memo: ViewMemo | None = None, cutoffs: CutoffSettings | None = None
) -> Starlette:
    """The API as a Starlette app with its routes relative to `/api/v1` and its error handlers;
    leaderboards and reports come from `memo` (a new one by default, whose boards' cutoff marks
    are read with `cutoffs`: default the bundled registry)."""
    api = _Api(engine, ViewMemo(engine, cutoffs=cutoffs) if memo is None else memo)
    account = "/agents/{agent}/{market}"
    routes = [
        Route("/", api.index, methods=["GET"]),
        Route("/markets", api.markets, methods=["GET"]),
        Route("/leaderboard/{market}", api.leaderboard, methods=["GET"]),
        Route("/leaderboard/{market}/significance", api.significance, methods=["GET"]),
        Route(account, api.account, methods=["GET"]),
        Route(f"{account}/nav", api.nav, methods=["GET"]),
        Route(f"{account}/benchmark", api.benchmark, methods=["GET"]),
        Route(f"{account}/metrics", api.metrics, methods=["GET"]),
        Route(f"{account}/attribution", api.attribution, methods=["GET"]),
        Route(f"{account}/concordance", api.concordance, methods=["GET"]),
        Route(f"{account}/positions", api.positions, methods=["GET"]),
        Route(f"{account}/orders", api.orders, methods=["GET"]),
        Route(f"{account}/fills", api.fills, methods=["GET"]),
        Route(f"{account}/cycles", api.cycles, methods=["GET"]),
        Route("/seasons", api.seasons, methods=["GET"]),
        Route("/seasons/{name}", api.season, methods=["GET"]),
        Route("/cycles/{cycle_id}", api.cycle, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={
            ReportError: _not_found,
            TraceNotFound: _not_found,
            SeasonError: _not_found,
            ViewWorkerFailed: _unavailable,
            BadRequest: _bad_request,
            HTTPException: _http_error,
        },
    )


def api_routes(
    engine: Engine, *, memo: ViewMemo | None = None, cutoffs: CutoffSettings | None = None
) -> list[BaseRoute]:
    """The API's routes, to put among a server's own: one `Mount` at `/api/v1`. Pass the `memo`
    the server's pages use (and warm after a slot) to compute each leaderboard once for both
    (`cutoffs` as for `api_app`)."""
    return [Mount(PREFIX, app=api_app(engine, memo=memo, cutoffs=cutoffs))]
