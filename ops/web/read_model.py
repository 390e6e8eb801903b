"""The arena's read model: what the web pages and the JSON API show, read from the ledger.

This module owns the questions a viewer of the arena asks, each one function over a SQLAlchemy
`Engine` that only reads: the markets with their accounts and last slot; a market's leaderboard
over a window (`ops.reports.market_reports.leaderboard`, the numbers of `openbell leaderboard`,
never computed again here); an account's NAV series (slot and session-close snapshots), its
benchmark series and metric panel (`ops.reports.market_reports.report`, as `openbell report`
computes them), its positions (`store.holdings`, as `openbell positions`), its orders, fills and
cycles a page at a time (`store.account_history`), its factor attribution
(`ops.evaluation.attribution`, as `openbell report --attribution`), and one cycle's trace with its
orders (`store.traces`, `store.cycle_trades`, as `openbell trace`), and the ledger's seasons with a
season's manifest and methods card (`ops.seasons.card`, as `openbell season card`). Values are
frozen dataclasses with exact decimals and aware UTC instants; `ops.reports.exporting` turns them
into records. An unknown market, agent or account raises `ReportError`, an unknown cycle
`TraceNotFound`, an unknown season `SeasonError`.

A window is half-open `[start, end)` in UTC instants, as the CLI's `--start`/`--end` dates become;
`trailing_window` is the last `days` UTC days up to a market's last slot. Cost: the leaderboard
makes each of its queries once for the whole market, but reads every NAV snapshot and cycle of
the market in the window and computes the panel, the ranking and the benchmark in Python: about
the cost of `openbell leaderboard`, seconds on a 50-agent, one-year ledger. `benchmark` and
`metrics` need the market's leaderboard too (the benchmark is normalised over every account's
timestamps). Given a `ViewMemo`, the three share one market view, computed again only when the
market's version (`store.queries.market_version`) changed. Pages, positions, markets and traces
are a few indexed queries each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from openbell.markets.errors import ReportError, TraceNotFound
from openbell.ops.evaluation.attribution.ledger_inputs import (
    AccountAttribution,
    account_attribution,
)
from openbell.ops.evaluation.benchmark import benchmark_for
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.evaluation.significance import BoardSignificance
from openbell.ops.reports import market_reports as reports
from openbell.ops.reports.board_significance import significance_of
from openbell.ops.reports.contamination import SlotsView, cutoff_marks, headline_board
from openbell.ops.reports.market_reports import MARKETS, AgentReport, Leaderboard, MarketView
from openbell.ops.seasons.card import MethodsCard, methods_card, to_markdown
from openbell.ops.seasons.opening import season_record
from openbell.ops.web.memo import ViewMemo
from openbell.store import account_history, queries
from openbell.store.account_history import AccountCycle, AccountFill, AccountOrder
from openbell.store.cycle_trades import CycleOrder, orders_of_cycle
from openbell.store.holdings import AccountHoldings, account_holdings
from openbell.store.queries import AccountInfo, NavRow
from openbell.store.records import SnapshotKind
from openbell.store.seasons import Season, current_season, season_named, seasons
from openbell.store.traces import CycleTrace, cycle_trace

Window = tuple[datetime | None, datetime | None]
#: The whole ledger: no start, no end.
ALL_TIME: Window = (None, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketSummary:
    """A market of the arena: its currency, its benchmark, how many accounts trade in it and the
    latest slot any of them ran (None before the first)."""

    market: str
    currency: str
    benchmark: str
    benchmark_label: str
    accounts: int
    agents: tuple[str, ...]
    last_slot_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NavSeries:
    """An account's NAV snapshots in a window, oldest first: at its decision slots, and at the
    closes of the sessions it traded."""

    account: AccountInfo
    slot: tuple[NavRow, ...]
    close: tuple[NavRow, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkSeries:
    """The market's benchmark valued at an account's slot timestamps, normalised as the
    leaderboard normalises it (to the market's initial cash, over every account's timestamps)."""

    account: AccountInfo
    benchmark: str
    points: tuple[NavPoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OrdersPage:
    """A page of an account's orders, newest first; `next_before` is the cursor of the next
    page (an order id), None on the last page."""

    account: AccountInfo
    items: tuple[AccountOrder, ...]
    next_before: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FillsPage:
    """A page of an account's fills, newest first; `next_before` is a fill id, or None."""

    account: AccountInfo
    items: tuple[AccountFill, ...]
    next_before: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CyclesPage:
    """A page of an account's cycles, latest slot first; `next_before` is the slot instant of
    the next page's cursor, or None."""

    account: AccountInfo
    items: tuple[AccountCycle, ...]
    next_before: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleDetail:
    """One cycle as `openbell trace` shows it: header, usage, trace entries, orders and fills."""

    trace: CycleTrace
    orders: tuple[CycleOrder, ...]


def markets(engine: Engine) -> list[MarketSummary]:
    """Every market with accounts in the ledger, in the order us, cn, crypto (two queries)."""
    infos = queries.accounts(engine)
    last = account_history.last_slots(engine)
    out: list[MarketSummary] = []
    for market in MARKETS:
        found = [info for info in infos if info.market == market]
        if not found:
            continue
        spec = benchmark_for(market)
        out.append(
            MarketSummary(
                market=market,
                currency=found[0].currency,
                benchmark=spec.name,
                benchmark_label=spec.label,
                accounts=len(found),
                agents=tuple(info.agent_name for info in found),
                last_slot_at=last.get(market),
            )
        )
    return out


def trailing_window(last_slot_at: datetime, days: int) -> Window:
    """The `days` UTC days ending with the day of `last_slot_at`, as `[start, end)` instants:
    `openbell leaderboard --start D-(days-1) --end D` where D is that day."""
    if days < 1:
        raise ValueError("a trailing window has at least one day")
    day = last_slot_at.astimezone(UTC).date()
    end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    return end - timedelta(days=days), end


def _view(engine: Engine, market: str, window: Window, memo: ViewMemo | None) -> MarketView:
    if memo is not None:
        return memo.view(market, *window)
    return reports.market_view(engine, market, *window)


def leaderboard(
    engine: Engine,
    market: str,
    window: Window = ALL_TIME,
    *,
    memo: ViewMemo | None = None,
    slots: SlotsView = "post-cutoff",
) -> Leaderboard:
    """The market's leaderboard over `window`, exactly as `openbell leaderboard` computes it
    (from `memo` while the ledger has not changed, when given): the post-cutoff headline, or
    every slot (`slots="all"`), with the cutoff marks of the memo's registry
    (`ops.reports.contamination`; the bundled one without a memo)."""
    view = _view(engine, market, window, memo)
    settings = None if memo is None else memo.cutoffs
    return headline_board(view, cutoff_marks(view, settings, slots=slots))


def significance(
    engine: Engine, market: str, window: Window = ALL_TIME, *, memo: ViewMemo | None = None
) -> BoardSignificance:
    """The significance suite of the market's board over `window`, as `openbell leaderboard
    --wide` computes it with its default permutations and seed (kept in `memo` until the market's
    version changes, when given: every account's metrics document reads it)."""
    if memo is None:
        return significance_of(_view(engine, market, window, None))
    return memo.remember(
        BoardSignificance,
        ("significance", market, *window),
        lambda: significance_of(_view(engine, market, window, memo)),
        market=market,
    )


def equity_curves(
    engine: Engine, market: str, window: Window = ALL_TIME, *, memo: ViewMemo | None = None
) -> dict[str, tuple[NavPoint, ...]]:
    """Each agent's slot NAVs in `window`, oldest first, as its leaderboard row measures them
    (for sparklines; read with the leaderboard, no query of its own)."""
    return _view(engine, market, window, memo).equity_curves()


def account(engine: Engine, agent: str, market: str) -> AccountInfo:
    """The account of `agent` in `market`; `ReportError` when there is none."""
    for info in queries.accounts(engine, market):
        if info.agent_name == agent:
            return info
    raise ReportError(f"agent {agent!r} has no account in market {market!r} in the ledger")


def nav_series(
    engine: Engine,
    agent: str,
    market: str,
    window: Window = ALL_TIME,
    *,
    memo: ViewMemo | None = None,
) -> NavSeries:
    """The account's slot and close NAV snapshots in `window` (two indexed queries; kept in
    `memo` until the market's version changes, when given)."""
    info = account(engine, agent, market)
    start, end = window

    def read() -> NavSeries:
        ids = [info.account_id]
        slot = queries.nav_series_of(engine, ids, SnapshotKind.SLOT, start, end)
        close = queries.nav_series_of(engine, ids, SnapshotKind.CLOSE, start, end)
        return NavSeries(
            account=info,
            slot=tuple(slot[info.account_id]),
            close=tuple(close[info.account_id]),
        )

    if memo is None:
        return read()
    return memo.remember(NavSeries, ("nav", agent, market, start, end), read, market=market)


def metrics(
    engine: Engine,
    agent: str,
    market: str,
    window: Window = ALL_TIME,
    *,
    memo: ViewMemo | None = None,
) -> AgentReport:
    """The account's metric panel over `window`, as `openbell report` computes it (on the
    market's view from `memo`, when given)."""
    account(engine, agent, market)
    if memo is not None:
        return memo.report(agent, market, *window)
    return reports.report(engine, agent, market, *window)


def benchmark(
    engine: Engine,
    agent: str,
    market: str,
    window: Window = ALL_TIME,
    *,
    memo: ViewMemo | None = None,
) -> BenchmarkSeries:
    """The benchmark series the account's panel is measured against (its report's)."""
    found = metrics(engine, agent, market, window, memo=memo)
    return BenchmarkSeries(
        account=found.account, benchmark=found.benchmark, points=found.benchmark_navs
    )


def attribution(
    engine: Engine,
    agent: str,
    market: str,
    window: Window = ALL_TIME,
    *,
    memo: ViewMemo | None = None,
) -> AccountAttribution:
    """The account's factor attribution over `window`, as `openbell report --attribution`
    computes it (from `memo` while the ledger has not changed, when given, computed by its view
    source: it reads every snapshot of the account and the universe's bars, about a second an
    account on the demo's ledger). `ReportError` when the window holds fewer than two of its
    slot snapshots."""
    account(engine, agent, market)
    if memo is not None:
        return memo.attribution(agent, market, *window)
    return account_attribution(engine, agent, market, *window)


def positions(engine: Engine, agent: str, market: str) -> AccountHoldings:
    """The account's cash and open positions at their last marks, as `openbell positions`."""
    found = account_holdings(engine, market=market, agent=agent)
    if not found:
        raise ReportError(f"agent {agent!r} has no account in market {market!r} in the ledger")
    return found[0]


def orders(
    engine: Engine, agent: str, market: str, *, limit: int, before: int | None = None
) -> OrdersPage:
    """A page of at most `limit` of the account's orders with an id below `before`."""
    info = account(engine, agent, market)
    rows = account_history.orders_page(engine, info.account_id, limit=limit + 1, before_id=before)
    items = tuple(rows[:limit])
    more = len(rows) > limit
    return OrdersPage(account=info, items=items, next_before=items[-1].order_id if more else None)


def fills(
    engine: Engine, agent: str, market: str, *, limit: int, before: int | None = None
) -> FillsPage:
    """A page of at most `limit` of the account's fills with an id below `before`."""
    info = account(engine, agent, market)
    rows = account_history.fills_page(engine, info.account_id, limit=limit + 1, before_id=before)
    items = tuple(rows[:limit])
    more = len(rows) > limit
    return FillsPage(account=info, items=items, next_before=items[-1].fill_id if more else None)


def cycles(
    engine: Engine, agent: str, market: str, *, limit: int, before: datetime | None = None
) -> CyclesPage:
    """A page of at most `limit` of the account's cycles with a slot before `before`."""
    info = account(engine, agent, market)
    rows = account_history.cycles_page(engine, info.account_id, limit=limit + 1, before_at=before)
    items = tuple(rows[:limit])
    more = len(rows) > limit
    return CyclesPage(account=info, items=items, next_before=items[-1].slot_at if more else None)


def cycle(engine: Engine, cycle_id: int) -> CycleDetail:
    """Cycle `cycle_id` with its trace and orders; `TraceNotFound` when there is no such cycle."""
    found = cycle_trace(engine, cycle_id)
    if found is None:
        raise TraceNotFound(f"no cycle {cycle_id} in the ledger")
    return CycleDetail(trace=found, orders=tuple(orders_of_cycle(engine, cycle_id)))


# -- seasons ---------------------------------------------------------------------------------


def board_season(engine: Engine, chosen: str | None) -> Season | None:
    """The season a board names: `chosen` (`SeasonError` if there is none of that name), else
    the current one (`store.seasons.current_season`), else None."""
    return current_season(engine) if chosen is None else season_named(engine, chosen)


def seasons_document(engine: Engine) -> dict[str, Any]:
    """`GET /api/v1/seasons`: every season, and the one the boards name."""
    current = current_season(engine)
    return {
        "seasons": [season_record(season) for season in seasons(engine)],
        "current": None if current is None else current.name,
    }


def season_card(engine: Engine, name: str) -> tuple[Season, MethodsCard]:
    """The season `name` and its methods card; `SeasonError` if there is none of that name."""
    season = season_named(engine, name)
    return season, methods_card(engine, season)


def season_document(engine: Engine, name: str) -> dict[str, Any]:
    """`GET /api/v1/seasons/{name}`: the season, its manifest and its methods card."""
    season, card = season_card(engine, name)
    return {
        "season": season_record(season),
        "manifest": json.loads(season.manifest),
        "card": [
            {
                "title": section.title,
                "lines": list(section.lines),
                "tables": [
                    {"headers": list(table.headers), "rows": [list(row) for row in table.rows]}
                    for table in section.tables
                ],
            }
            for section in card.sections
        ],
        "card_markdown": to_markdown(card),
    }
