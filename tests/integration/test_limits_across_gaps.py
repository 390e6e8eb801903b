"""Price limits across suspensions, through the replay and the live daemon: the previous close is
the last close before the slot's session however long the stock was suspended, and on an ex-date
the ex-date reference price.

601088.SH was suspended from 2025-08-04 and opened at its limit-up (41.32, +10% of the 2025-08-01
close 37.56) on 2025-08-18: a buy there is refused as `limit_up` (it was refused as `no_price`,
"There is no previous close", before), and a buy the next day, inside the band, fills. A synthetic
stock suspended for six weeks comes back on the ex-date of a 1.00 dividend: its limit-up is 10% over
the reference price 9.00, not over its last close 10.00, so an open at 9.95 refuses a buy. The live
daemon reads a source that is not a replay source (a vendor's road: range reads, no history, the
bar cache and retries), on a fast fake clock, one short run per slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from openbell.agents.protocol import DecisionContext
from openbell.daemon.clock import ScaledClock
from openbell.daemon.plan import LivePlan, MarketPlan, ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.corporate_actions import ActionKind, CorporateAction, RecordedActions
from openbell.markets.domain import Bar
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import ForwardingSource, MarketDataSource
from openbell.store.migrate import upgrade
from openbell_testkit.agents import small_universe
from openbell_testkit.live import query, running, sleep_until

SHANGHAI = ZoneInfo("Asia/Shanghai")
D = Decimal
SUSPENDED = "601088.SH"
SYNTHETIC = "600000.SH"
#: A real clock second is this many clock seconds: a run from 30 s before a 09:30 slot to 90 s
#: after it takes two real seconds, and the slot's grace (two clock hours) two real minutes.
SPEED = 60.0


class Buyer:
    """Buys 100 shares of its symbol at every slot; what became of each order is in the ledger."""

    def __init__(self, symbol: str) -> None:
        self._symbol = symbol

    @property
    def name(self) -> str:
        return "buyer"

    @property
    def kind(self) -> str:
        return "test"

    async def decide(self, ctx: DecisionContext) -> None:
        await ctx.tools.place_order(self._symbol, "buy", shares=D(100), reason="gap test")


def slot(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 9, 30, tzinfo=SHANGHAI).astimezone(UTC)


def orders(url: str) -> dict[date, tuple[str, str | None, Decimal | None]]:
    """Each order by its session: status, reject reason, fill price."""
    rows = query(
        url,
        'SELECT o.placed_at, o.status, o.reject_reason, f.price FROM "order" o '
        "LEFT JOIN fill f ON f.order_id = o.id ORDER BY o.id",
    )
    out = {}
    for placed_at, status, reason, price in rows:
        at = placed_at if isinstance(placed_at, datetime) else datetime.fromisoformat(placed_at)
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        out[at.astimezone(SHANGHAI).date()] = (status, reason, None if price is None else D(price))
    return out


def bundled_market(
    source: MarketDataSource, agent: Buyer, grace: timedelta | None = None
) -> MarketPlan:
    return MarketPlan(
        market="cn",
        source=source,
        universe=small_universe("cn", SUSPENDED),
        cadence="daily",
        initial_cash=D(100000),
        agents=(agent,),
        grace=grace,
    )


def day_bar(day: date, open_: str, close: str) -> Bar:
    opened, closed = D(open_), D(close)
    return Bar(
        symbol=SYNTHETIC,
        start_at=slot(day),
        end_at=datetime(day.year, day.month, day.day, 15, tzinfo=SHANGHAI).astimezone(UTC),
        open=opened,
        high=max(opened, closed),
        low=min(opened, closed),
        close=closed,
        volume=D(100000),
    )


BEFORE = [date(2025, 6, 3), date(2025, 6, 4), date(2025, 6, 5), date(2025, 6, 6)]
BACK, NEXT = date(2025, 7, 21), date(2025, 7, 22)  # six weeks later; BACK is the ex-date


def synthetic_source() -> ReplaySource:
    bars = [day_bar(day, "10.00", "10.00") for day in BEFORE]
    bars += [day_bar(BACK, "9.95", "9.60"), day_bar(NEXT, "9.70", "9.80")]
    return ReplaySource(market="cn", bars={"1d": bars})


def dividend() -> RecordedActions:
    action = CorporateAction(
        symbol=SYNTHETIC,
        kind=ActionKind.CASH_DIVIDEND,
        ex_date=BACK,
        ex_at=slot(BACK),
        currency="CNY",
        source="test",
        cash=D("1.00"),
    )
    return RecordedActions(market="cn", actions=[action], name="test")


def synthetic_market(source: MarketDataSource, grace: timedelta | None = None) -> MarketPlan:
    return MarketPlan(
        market="cn",
        source=source,
        universe=small_universe("cn", SYNTHETIC),
        cadence="daily",
        initial_cash=D(100000),
        agents=(Buyer(SYNTHETIC),),
        grace=grace,
        actions=dividend(),
    )


def live_slots(url: str, market: MarketPlan, days: Sequence[date]) -> None:
    """One short live run of the daemon around each of `days`' 09:30 slot."""
    upgrade(url)
    plan = LivePlan(
        store_url=url, markets=(market,), http_listen=None, heartbeat_s=0.5, lease_s=3600.0
    )
    for day in days:
        clock = ScaledClock(slot(day) - timedelta(seconds=30), speed=SPEED)
        with running(plan, clock):
            sleep_until(clock, slot(day) + timedelta(seconds=90))
            deadline = slot(day) + timedelta(hours=1)
            while clock.now() < deadline and not _done_at(url, slot(day)):
                sleep_until(clock, clock.now() + timedelta(seconds=30))
        assert _done_at(url, slot(day)), f"no done cycle at {slot(day)}"


def _done_at(url: str, at: datetime) -> bool:
    rows = query(url, "SELECT slot_at, status FROM cycle")
    for slot_at, status in rows:
        found = slot_at if isinstance(slot_at, datetime) else datetime.fromisoformat(slot_at)
        found = found if found.tzinfo else found.replace(tzinfo=UTC)
        if found == at and status == "done":
            return True
    return False


class Vendor(ForwardingSource):
    """A live vendor's road to the bars: time-range reads only, no history, no prepared windows."""


def test_replay_refuses_the_limit_up_open_after_the_suspension_and_fills_the_next_day(
    sqlite_url: str,
) -> None:
    upgrade(sqlite_url)
    market = bundled_market(ReplaySource.from_bundled("cn", names=["cn-1d"]), Buyer(SUSPENDED))
    plan = ReplayPlan(
        store_url=sqlite_url,
        start_at=slot(date(2025, 8, 18)),
        end_at=slot(date(2025, 8, 20)),
        markets=(market,),
    )
    run_replay(plan)
    assert orders(sqlite_url) == {
        date(2025, 8, 18): ("rejected", "limit_up", None),
        date(2025, 8, 19): ("filled", None, D("39.17")),  # the 39.15 open, 5 bps of slippage
    }


def test_live_daemon_refuses_the_limit_up_open_after_the_suspension(db_url: str) -> None:
    source = Vendor(ReplaySource.from_bundled("cn", names=["cn-1d"]))
    market = bundled_market(source, Buyer(SUSPENDED), grace=timedelta(hours=2))
    live_slots(db_url, market, [date(2025, 8, 18), date(2025, 8, 19)])
    assert orders(db_url) == {
        date(2025, 8, 18): ("rejected", "limit_up", None),
        date(2025, 8, 19): ("filled", None, D("39.17")),
    }


def test_replay_measures_the_limit_from_the_ex_date_reference_price_after_a_suspension(
    sqlite_url: str,
) -> None:
    upgrade(sqlite_url)
    plan = ReplayPlan(
        store_url=sqlite_url,
        start_at=slot(BEFORE[0]),
        end_at=slot(NEXT) + timedelta(days=1),
        markets=(synthetic_market(synthetic_source()),),
    )
    run_replay(plan)
    found = orders(sqlite_url)
    assert found[BEFORE[1]][0] == "filled"  # held before the suspension: its dividend is known
    assert found[BACK] == ("rejected", "limit_up", None)  # 9.95 >= 9.90, 10% over 9.00
    assert found[NEXT] == ("filled", None, D("9.71"))  # inside 9.60 +-10%


def test_live_daemon_measures_the_limit_from_the_ex_date_reference_price(sqlite_url: str) -> None:
    market = synthetic_market(Vendor(synthetic_source()), grace=timedelta(hours=2))
    live_slots(sqlite_url, market, [BEFORE[1], BACK, NEXT])
    found = orders(sqlite_url)
    assert found[BEFORE[1]][0] == "filled"
    assert found[BACK] == ("rejected", "limit_up", None)
    assert found[NEXT] == ("filled", None, D("9.71"))
