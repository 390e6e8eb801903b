"""A recorded live session replays from its cache to the same decisions (issue 15, item 5).

A live session runs the daemon's own desks (`build_desks` with the store's cache) and cycle runner
on a simulated clock, against a fake vendor at the network boundary: it serves the bundled crypto
bars up to the clock's now (SOL's each only 70 minutes after its end), quotes a little off the bars'
prices, and news of which one item is delivered three hours after its publication (a vendor's lag).
A deterministic agent reads the news of the last 48 hours, the fundamentals and the last bars of
each symbol, notes what it saw, and sizes its orders from them. The session is then replayed
offline from the live store's cache (`ops.wiring.cache_replay`) into a fresh ledger: the agent must
see exactly what it saw live (the lagged item only once the vendor delivered it, SOL's bars only
once fetched) and place the same orders, filled at the same prices. The live store is SQLite,
then Postgres; the replay ledger is a SQLite file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ToolError
from openbell.daemon.clock import SimulatedClock
from openbell.daemon.plan import MarketPlan, ReplayPlan, build_desks
from openbell.daemon.replay import run_replay
from openbell.daemon.runner import CycleRunner
from openbell.markets.domain import Bar, Instrument, NewsItem, Quote
from openbell.markets.fundamentals import FundamentalsReport, RecordedFundamentals
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import slots_between
from openbell.markets.sources import ForwardingSource, SymbolFilter
from openbell.markets.universes import Universe
from openbell.ops.wiring.cache_replay import cache_source
from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.live import query

START_AT = datetime(2025, 11, 3, 0, 0, tzinfo=UTC)
SYMBOLS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
SLOTS = slots_between("crypto", "hourly", START_AT, START_AT + timedelta(hours=7))
#: How long after its slot a live cycle runs (the vendor is asked then).
RUNS_AFTER = timedelta(seconds=5)
LAGGED = "SOL upgrade announced"
#: The vendor delivers SOL's bars this long after their end (the others' at once).
SOL_LAG = timedelta(minutes=70)
#: The vendor's last trade is this much above the bar's open: a replay that priced from its bars
#: instead of the recorded quotes would fill at other prices.
LIVE_MARKUP = Decimal("1.0007")
TICK = Decimal("0.00000001")


def news() -> list[tuple[NewsItem, datetime]]:
    """(item, when the vendor first delivers it)."""

    def item(symbol: str | None, hours: float, title: str) -> NewsItem:
        return NewsItem(
            symbol=symbol,
            published_at=START_AT + timedelta(hours=hours),
            title=title,
            source="wire",
        )

    return [
        (item("BTC/USDT", -30, "BTC ETF inflows"), START_AT - timedelta(hours=30)),
        (item("ETH/USDT", 0.5, "ETH staking surge"), START_AT + timedelta(hours=0.5)),
        (item(None, 1.5, "Crypto market opens higher"), START_AT + timedelta(hours=1.5)),
        # Published at 01:00, delivered by the vendor only at 04:00: live agents saw it from the
        # 04:00 cycle, and so must the replay's, though its publication is earlier.
        (item("SOL/USDT", 1, LAGGED), START_AT + timedelta(hours=4)),
        (item("BTC/USDT", 3.2, "BTC hash rate record"), START_AT + timedelta(hours=3.2)),
    ]


def reports() -> list[FundamentalsReport]:
    def report(symbol: str, hours: float, score: str) -> FundamentalsReport:
        at = START_AT + timedelta(hours=hours)
        return FundamentalsReport(
            symbol=symbol,
            period_end=date(2025, 10, 31),
            published_at=at,
            currency="USDT",
            values={"score": Decimal(score)},
            source="vendor",
        )

    return [report("BTC/USDT", -48, "2"), report("ETH/USDT", 2.5, "3"), report("SOL/USDT", 5, "1")]


class FakeVendor(ForwardingSource):
    """A live vendor at the network boundary over the bundled crypto bars: bars started by the
    clock's now (the last one unfinished), quotes a little off the bars, news once delivered."""

    def __init__(self, clock: SimulatedClock) -> None:
        super().__init__(ReplaySource.from_bundled("crypto", names=["crypto-1h"]))
        self._bars = ReplaySource.from_bundled("crypto", names=["crypto-1h"])
        self._clock = clock
        self._news = news()

    @property
    def name(self) -> str:
        return "fakevendor"

    async def bars(
        self, symbols: Any, interval: str, start_at: datetime, end_at: datetime
    ) -> dict[str, tuple[Bar, ...]]:
        now = self._clock.now()
        found = self._bars.bars_between(symbols, interval, start_at, min(end_at, now))
        found["SOL/USDT"] = tuple(
            bar
            for bar in found.get("SOL/USDT", ())
            if bar.end_at + SOL_LAG <= now or now < bar.end_at  # late, or still in progress
        )
        return {symbol: bars for symbol, bars in found.items() if bars}

    async def quote(self, symbols: Any, at: datetime) -> dict[str, Quote]:
        out = {}
        for symbol in symbols:
            quote = self._bars.quote_at(symbol, at)
            if quote is not None:  # a last trade a little off the bar's open, as live
                out[symbol] = replace(quote, price=(quote.price * LIVE_MARKUP).quantize(TICK))
        return out

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> list[NewsItem]:
        now = self._clock.now()
        found = [
            item
            for item, delivered_at in self._news
            if delivered_at <= now
            and start_at <= item.published_at < end_at
            and (symbols is None or item.symbol in symbols)
        ]
        found.sort(key=lambda item: item.published_at, reverse=True)
        return found[:limit]


@dataclass
class NewsTrader:
    """Buys each symbol towards a weight of 5% per news item on it in the last 48 hours plus 1%
    per point of its latest fundamentals score, and notes what it saw at each cycle."""

    name: str = "news-trader"
    kind: str = "python"
    seen: list[tuple[datetime, tuple[str, ...], tuple[tuple[str, str], ...]]] = field(
        default_factory=list
    )
    #: At each cycle, the end of the last hourly bar shown of each symbol.
    last_bars: list[tuple[datetime, tuple[tuple[str, datetime | None], ...]]] = field(
        default_factory=list
    )

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        found = await tools.get_news(lookback_hours=48, limit=20)
        assert not isinstance(found, ToolError), found
        titles = tuple(item.title for item in found.items)
        scores: dict[str, Decimal] = {}
        for symbol in SYMBOLS:
            reported = await tools.get_fundamentals(symbol)
            assert not isinstance(reported, ToolError), reported
            if reported.reports:
                scores[symbol] = reported.reports[0].values["score"]
        self.seen.append((ctx.now, titles, tuple((s, str(v)) for s, v in sorted(scores.items()))))
        ends = []
        for symbol in SYMBOLS:
            shown = await tools.get_bars(symbol, "1h", 3)
            assert not isinstance(shown, ToolError), shown
            ends.append((symbol, shown.bars[-1].end_at if shown.bars else None))
        self.last_bars.append((ctx.now, tuple(ends)))
        for symbol in SYMBOLS:
            mentions = sum(item.symbol == symbol for item in found.items)
            weight = Decimal("0.05") * mentions + Decimal("0.01") * scores.get(symbol, Decimal(0))
            if weight > 0 and symbol in ctx.universe.symbols:
                await tools.place_order(symbol, "buy", target_weight=weight, reason="news")
        await tools.finish(f"saw {len(titles)} news items")


def universe() -> Universe:
    return Universe(
        name="three-coins",
        market="crypto",
        as_of=START_AT.date(),
        instruments=tuple(
            Instrument(symbol=symbol, market="crypto", currency="USDT") for symbol in SYMBOLS
        ),
    )


def market_plan(source: Any, agent: NewsTrader, fundamentals: Any) -> MarketPlan:
    return MarketPlan(
        market="crypto",
        source=source,
        universe=universe(),
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=(agent,),
        fundamentals=fundamentals,
    )


def run_live_session(store_url: str, agent: NewsTrader) -> None:
    """The live daemon's desks and runner, slot by slot on a simulated clock."""
    upgrade(store_url)
    clock = SimulatedClock(START_AT)
    plan = market_plan(FakeVendor(clock), agent, RecordedFundamentals.of(reports()))
    engine = make_engine(store_url)
    try:
        ledger = Ledger(engine)
        desks, accounts = build_desks(
            [plan], ledger, START_AT, clock=clock, cache=SqlBarCache(engine)
        )
        runner = CycleRunner(ledger=ledger, desks=desks, run_id="live", lease=timedelta(minutes=15))
        for slot_at in SLOTS:
            now = clock.set(slot_at + RUNS_AFTER)
            asyncio.run(runner.run_slot("crypto", slot_at, accounts["crypto"], now))
    finally:
        engine.dispose()


def replay_from_cache(live_url: str, replay_url: str, agent: NewsTrader) -> None:
    cached = cache_source("crypto", SYMBOLS, live_url)
    assert cached.source is not None
    plan = ReplayPlan(
        store_url=replay_url,
        start_at=START_AT,
        end_at=SLOTS[-1] + timedelta(hours=1),
        markets=(market_plan(cached.source, agent, cached.fundamentals),),
        resume=False,
        run_id="replay",
        migrate=True,
    )
    run_replay(plan)


def trades(store_url: str) -> list[tuple[Any, ...]]:
    orders = query(
        store_url,
        "SELECT c.slot_at, o.symbol, o.side, o.quantity, o.status, f.price, f.filled_at "
        'FROM "order" o JOIN cycle c ON c.id = o.cycle_id '
        'LEFT JOIN "fill" f ON f.order_id = o.id ORDER BY c.slot_at, o.seq',
    )
    return [
        (
            instant(row[0]),
            row[1],
            row[2],
            Decimal(str(row[3])),
            row[4],
            None if row[5] is None else Decimal(str(row[5])),
            None if row[6] is None else instant(row[6]),
        )
        for row in orders
    ]


def instant(value: datetime | str) -> datetime:
    """A stored instant as read by raw SQL: a datetime (Postgres) or ISO text (SQLite)."""
    at = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "live_store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_live_session_replays_from_its_cache_to_the_same_decisions(
    live_store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    live_url: str = request.getfixturevalue("sqlite_url" if live_store == "sqlite" else "pg_url")
    replay_url = f"sqlite:///{tmp_path / 'replay.db'}"
    live, replayed = NewsTrader(), NewsTrader()

    run_live_session(live_url, live)
    replay_from_cache(live_url, replay_url, replayed)

    # The replay rings at the starts of the recorded final bars: the last live slot's bar was
    # not final when last fetched, so that slot is not replayed.
    assert [at for at, _, _ in replayed.seen] == SLOTS[:-1]
    assert replayed.seen == live.seen[: len(replayed.seen)]
    # SOL's last bar shown live was the one that ended two hours before the slot (delivered 70
    # minutes after its end); the replay shows it no earlier, though it ended an hour earlier.
    assert replayed.last_bars == live.last_bars[: len(replayed.last_bars)]
    for at, ends in live.last_bars[1:]:
        assert dict(ends)["BTC/USDT"] == at
        assert dict(ends)["SOL/USDT"] == at - timedelta(hours=2)
    seen_at = {at: titles for at, titles, _ in live.seen}
    assert LAGGED not in seen_at[START_AT + timedelta(hours=3)]
    assert LAGGED in seen_at[START_AT + timedelta(hours=4)]
    scores_at = {at: scores for at, _, scores in live.seen}
    assert ("ETH/USDT", "3") not in scores_at[START_AT + timedelta(hours=2)]
    assert ("ETH/USDT", "3") in scores_at[START_AT + timedelta(hours=3)]

    live_trades = [row for row in trades(live_url) if row[0] in SLOTS[:-1]]
    replay_trades = trades(replay_url)
    assert sum(row[4] == "filled" for row in live_trades) >= 5
    assert [row[:3] for row in replay_trades] == [row[:3] for row in live_trades]
    assert replay_trades == live_trades


def test_a_replay_of_the_bundled_bars_has_no_news_where_the_cache_has(tmp_path: Path) -> None:
    """The control: the same agent over the bundled bars alone sees no news, so the equality
    above is owed to the cache."""
    live_url = f"sqlite:///{tmp_path / 'live.db'}"
    run_live_session(live_url, NewsTrader())
    bundled = NewsTrader()
    plan = ReplayPlan(
        store_url=f"sqlite:///{tmp_path / 'bundled.db'}",
        start_at=START_AT,
        end_at=SLOTS[-1],
        markets=(
            market_plan(
                ReplaySource.from_bundled("crypto", names=["crypto-1h"]),
                bundled,
                RecordedFundamentals(),
            ),
        ),
        resume=False,
        run_id="bundled",
        migrate=True,
    )
    run_replay(plan)
    assert bundled.seen
    assert all(titles == () for _, titles, _ in bundled.seen)
