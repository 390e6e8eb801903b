"""Corporate actions through the replay driver from recorded Yahoo payloads (SQLite, Postgres).

AAPL's 4-for-1 split of 2020-08-31 held over its ex-date keeps the NAV continuous (without the
action the same replay shows the 75% cliff), a cash dividend adds `quantity * amount` to the cash
on its ex-date, both ledgers verify, and actions are refused on adjusted bars. The bars and the
actions both come from the recorded payloads through the real yfinance adapter; only Yahoo's HTTP
layer is fake, and the network is refused.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yfinance as yf
from sqlalchemy import select

from openbell.agents.protocol import DecisionContext
from openbell.daemon.plan import MarketPlan, ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.adapters.yfinance import YahooSource
from openbell.markets.corporate_actions import CorporateActionSource
from openbell.markets.domain import Instrument, utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Universe
from openbell.ops.evaluation.return_metrics import NavPoint, max_drawdown, simple_returns
from openbell.store import queries
from openbell.store.core_tables import CORPORATE_ACTION_TABLE, NAV_SNAPSHOT_TABLE
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger
from openbell_testkit.offline import refuse_network
from openbell_testkit.yahoo import charts, payload, source

# The replay windows start a session after the recorded bars (AAPL 08-27, 08-28, ex 08-31, 09-01;
# 08-07, 08-08, ex 08-11, 08-12): a symbol is offered only once it has a bar ended by the slot.
SPLIT_WINDOW = (utc(2020, 8, 28), utc(2020, 9, 2))
DIVIDEND_WINDOW = (utc(2025, 8, 8), utc(2025, 8, 13))
RECORDED_BEFORE = timedelta(days=1)


@pytest.fixture(autouse=True)
def _offline_yahoo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    refuse_network(monkeypatch, with_curl=True)
    yf.set_tz_cache_location(str(tmp_path / "yf-cache"))
    yf.data.YfData.cache_get.cache_clear()


@dataclass
class BuyOnce:
    """Buys `shares` of AAPL at its first cycle, then holds."""

    name: str = "holder"
    kind: str = "test"
    shares: Decimal = Decimal(10)
    bought: bool = field(default=False)

    async def decide(self, ctx: DecisionContext) -> None:
        if not self.bought:
            await ctx.tools.place_order("AAPL", "buy", shares=self.shares, reason="hold over ex")
            self.bought = True
        await ctx.tools.finish("holding")


def _yahoo(name: str, window: tuple[datetime, datetime]) -> tuple[ReplaySource, YahooSource]:
    """The recorded payload `name` as replay bars (through the adapter) and as an action source."""
    yahoo, _ = source([charts({"AAPL": (200, payload(name))})], window[1], universe=("AAPL",))
    bars = asyncio.run(yahoo.bars(["AAPL"], "1d", window[0] - RECORDED_BEFORE, window[1]))["AAPL"]
    return ReplaySource(market="us", bars={"1d": bars}, name=f"replay:{name}"), yahoo


def _replay(
    url: str,
    window: tuple[datetime, datetime],
    bars: ReplaySource,
    actions: CorporateActionSource | None,
) -> list[tuple[datetime, str, Decimal, Decimal]]:
    """Replay BuyOnce over `window`; every NAV snapshot as (at, kind, cash, nav), in time order."""
    upgrade(url)
    market = MarketPlan(
        market="us",
        source=bars,
        universe=Universe(
            name="aapl",
            market="us",
            as_of=window[0].date(),
            instruments=(Instrument(symbol="AAPL", market="us", currency="USD"),),
        ),
        cadence="daily",
        initial_cash=Decimal(10000),
        agents=(BuyOnce(),),
        actions=actions,
    )
    report = run_replay(
        ReplayPlan(store_url=url, start_at=window[0], end_at=window[1], markets=(market,))
    )
    assert (report.cycles_done, report.fills) == (3, 1)
    engine = make_engine(url)
    try:
        verified = verify_ledger(engine)
        assert verified.ok, verified.lines()
        with engine.connect() as connection:
            table = NAV_SNAPSHOT_TABLE.c
            rows = connection.execute(
                select(table.at, table.kind, table.cash, table.nav).order_by(table.at, table.kind)
            ).all()
    finally:
        engine.dispose()
    return [(row.at, row.kind, row.cash, row.nav) for row in rows]


def _max_drawdown(url: str) -> float | None:
    """The metric panel's max drawdown over the account's slot NAV series."""
    engine = make_engine(url)
    try:
        rows = queries.nav_series(engine, 1)
    finally:
        engine.dispose()
    return max_drawdown(simple_returns([NavPoint(at=row.at, nav=row.nav) for row in rows]))


def _worst_step(navs: list[tuple[datetime, str, Decimal, Decimal]]) -> Decimal:
    return min(later[3] / earlier[3] - 1 for earlier, later in itertools.pairwise(navs))


def test_a_4_for_1_split_held_over_its_ex_date_is_not_a_75_percent_loss(db_url: str) -> None:
    bars, yahoo = _yahoo("chart_AAPL_1d_split_2020.json", SPLIT_WINDOW)
    navs = _replay(db_url, SPLIT_WINDOW, bars, yahoo)
    assert len(navs) == 6  # a slot and a close snapshot per session
    assert _worst_step(navs) > Decimal("-0.02")
    drawdown = _max_drawdown(db_url)
    assert drawdown is not None
    assert drawdown > -0.01  # the metric panel sees a 0.4% dip, not a 75% crash
    ex_slot = next(nav for nav in navs if nav[0] == utc(2020, 8, 31, 13, 30))
    before = next(nav for nav in navs if nav[0] == utc(2020, 8, 28, 20, 0))
    # 10 shares at the 499.23 close, then 40 at the 127.58 open: cash unchanged, NAV +2.2%
    assert ex_slot[2] == before[2]
    assert ex_slot[3] - ex_slot[2] == 40 * Decimal("127.58")
    assert before[3] - before[2] == 10 * Decimal("499.23")
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            entry = connection.execute(select(CORPORATE_ACTION_TABLE)).one()
    finally:
        engine.dispose()
    assert (entry.quantity_before, entry.quantity_delta, entry.source) == (
        Decimal(10),
        Decimal(30),
        "yfinance",
    )


def test_without_the_split_the_same_replay_shows_the_cliff(sqlite_url: str) -> None:
    """The control: what the test above guards against, so it cannot pass by measuring nothing."""
    bars, _ = _yahoo("chart_AAPL_1d_split_2020.json", SPLIT_WINDOW)
    navs = _replay(sqlite_url, SPLIT_WINDOW, bars, None)
    assert _worst_step(navs) < Decimal("-0.35")  # half the account in AAPL loses 75% of its value
    drawdown = _max_drawdown(sqlite_url)
    assert drawdown is not None
    assert drawdown < -0.35


def test_a_cash_dividend_adds_quantity_times_amount_on_the_ex_date(db_url: str) -> None:
    bars, yahoo = _yahoo("chart_AAPL_1d_dividend_2025.json", DIVIDEND_WINDOW)
    navs = _replay(db_url, DIVIDEND_WINDOW, bars, yahoo)
    cash = {(at, kind): cash for at, kind, cash, _ in navs}
    before = cash[(utc(2025, 8, 8, 20, 0), "close")]
    assert cash[(utc(2025, 8, 11, 13, 30), "slot")] - before == 10 * Decimal("0.26")
    assert cash[(utc(2025, 8, 12, 20, 0), "close")] - before == Decimal("2.60")  # paid once


def test_actions_are_refused_on_adjusted_bars() -> None:
    bars, yahoo = _yahoo("chart_AAPL_1d_split_2020.json", SPLIT_WINDOW)
    adjusted = ReplaySource(
        market="us",
        bars={"1d": list(bars.bars_between(["AAPL"], "1d", *SPLIT_WINDOW)["AAPL"])},
        adjustment="adjusted",
    )
    with pytest.raises(ValueError, match="adjusted bars, not only raw ones"):
        MarketPlan(
            market="us",
            source=adjusted,
            universe=Universe(
                name="aapl",
                market="us",
                as_of=SPLIT_WINDOW[0].date(),
                instruments=(Instrument(symbol="AAPL", market="us", currency="USD"),),
            ),
            cadence="daily",
            initial_cash=Decimal(10000),
            agents=(),
            actions=yahoo,
        )
