"""The paper broker on a real SQLite ledger over the bundled replay data.

An order fills at the first price at or after its placement, moved by slippage; a key already
recorded returns its stored outcome and changes nothing; no price (or one too far ahead) is a
`no_price` rejection; A-share limits use the snapshot's previous close; T+1 holds across the
session; a rejection decided before execution is recorded as such.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.agents.broker import PaperBroker
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Fill, Order, Rejection, RejectReason, Side, utc
from openbell.markets.gateway import MarketSnapshot
from openbell.markets.rules import CN, US
from openbell.store.ledger import Ledger
from openbell.store.records import RecordedOrder
from openbell_testkit.agents import CN_OPEN, US_OPEN, Arena, make_arena
from openbell_testkit.store import dump_tables

D = Decimal


pytestmark = pytest.mark.sqlite_only


def place(
    arena: Arena,
    symbol: str,
    side: Side,
    quantity: str,
    at: datetime,
    *,
    seq: int = 1,
    snapshot: MarketSnapshot | None = None,
    cycle_at: datetime | None = None,
) -> RecordedOrder:
    order = Order(
        instrument=arena.universe.instrument(symbol), side=side, quantity=D(quantity), placed_at=at
    )
    return arena.broker.place(
        cycle_id=arena.claim(cycle_at or at),
        seq=seq,
        order=order,
        snapshot=snapshot or MarketSnapshot(market=arena.rules.market, at=at, quotes={}),
    )


def test_an_order_fills_at_the_first_price_at_or_after_it_moved_by_slippage(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us")
    recorded = place(arena, "AAPL", Side.BUY, "3", US_OPEN)
    first = arena.source.first_price_at_or_after("AAPL", US_OPEN)
    assert first is not None
    assert first.at == US_OPEN
    fill = recorded.outcome
    assert isinstance(fill, Fill)
    assert fill.price == (first.price * D("1.0005")).quantize(D("0.01"), "ROUND_CEILING")
    assert (fill.quantity, fill.filled_at, fill.price_source) == (D(3), US_OPEN, "first_price")
    assert (recorded.seq, recorded.symbol, recorded.side, recorded.created) == (
        1,
        "AAPL",
        Side.BUY,
        True,
    )
    assert arena.cash(US_OPEN) == D(10000) - fill.notional - fill.fees


def test_a_recorded_key_returns_its_outcome_and_changes_nothing(
    ledger: Ledger, engine: Engine
) -> None:
    arena = make_arena(ledger, "us")
    first = place(arena, "AAPL", Side.BUY, "3", US_OPEN)
    before = dump_tables(engine)
    again = place(arena, "MSFT", Side.BUY, "5", US_OPEN)  # another order under the same key
    assert not again.created
    assert (again.outcome, again.order_id, again.fill_id) == (
        first.outcome,
        first.order_id,
        first.fill_id,
    )
    assert (again.symbol, again.quantity) == ("AAPL", D(3))
    assert dump_tables(engine) == before


@pytest.mark.parametrize(
    "placed_at",
    [
        # 15:59 New York: the last hourly bar started at 15:00, the next price is the next open
        pytest.param(utc(2025, 10, 1, 19, 59), id="next-price-tomorrow"),
        pytest.param(utc(2025, 10, 31, 19, 59), id="after-the-data"),
    ],
)
def test_no_price_soon_enough_is_a_no_price_rejection(ledger: Ledger, placed_at: datetime) -> None:
    arena = make_arena(ledger, "us")
    recorded = place(arena, "AAPL", Side.BUY, "1", placed_at)
    assert isinstance(recorded.outcome, Rejection)
    assert recorded.outcome.reason is RejectReason.NO_PRICE
    assert arena.holdings(placed_at) == {}


def test_a_share_limits_use_the_snapshots_previous_close(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    quote = arena.source.quote_at("601398.SH", CN_OPEN)
    assert quote is not None
    assert quote.price == D("7.29")
    # a previous close of 6.63 puts limit-up at 7.29 (6.63 * 1.1 = 7.293): a buy there is refused
    limited = MarketSnapshot(
        market="cn", at=CN_OPEN, quotes={}, previous_closes={"601398.SH": D("6.63")}
    )
    refused = place(arena, "601398.SH", Side.BUY, "100", CN_OPEN, snapshot=limited)
    assert isinstance(refused.outcome, Rejection)
    assert refused.outcome.reason is RejectReason.LIMIT_UP
    no_close = place(arena, "601398.SH", Side.BUY, "100", CN_OPEN, seq=2)
    assert isinstance(no_close.outcome, Rejection)
    assert no_close.outcome.reason is RejectReason.NO_PRICE
    normal = MarketSnapshot(
        market="cn", at=CN_OPEN, quotes={}, previous_closes={"601398.SH": D("7.25")}
    )
    filled = place(arena, "601398.SH", Side.BUY, "100", CN_OPEN, seq=3, snapshot=normal)
    assert isinstance(filled.outcome, Fill)


def test_t_plus_1_holds_a_buy_until_the_next_session(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    closes = {"601398.SH": D("7.25")}

    def snapshot(at: datetime) -> MarketSnapshot:
        return MarketSnapshot(market="cn", at=at, quotes={}, previous_closes=closes)

    bought = place(arena, "601398.SH", Side.BUY, "200", CN_OPEN, snapshot=snapshot(CN_OPEN))
    assert isinstance(bought.outcome, Fill)
    later = CN_OPEN + timedelta(hours=1)  # 10:30 Shanghai, the same session
    locked = place(arena, "601398.SH", Side.SELL, "100", later, snapshot=snapshot(later))
    assert isinstance(locked.outcome, Rejection)
    assert locked.outcome.reason is RejectReason.T_PLUS_1
    next_session = utc(2025, 10, 13, 1, 30)
    sold = place(
        arena, "601398.SH", Side.SELL, "100", next_session, snapshot=snapshot(next_session)
    )
    assert isinstance(sold.outcome, Fill)
    assert arena.holdings(next_session) == {"601398.SH": D(100)}


def test_a_rejection_decided_before_execution_is_recorded(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    order = Order(
        instrument=arena.universe.instrument("AAPL"),
        side=Side.BUY,
        quantity=D(2),
        placed_at=US_OPEN,
    )
    recorded = arena.broker.reject(
        cycle_id=arena.claim(US_OPEN),
        seq=1,
        order=order,
        reason=RejectReason.NOT_IN_UNIVERSE,
        message="Not ours.",
        target_weight=D("0.2"),
    )
    [stored] = ledger.cycle_orders(arena.claim(US_OPEN))
    assert stored.seq == 1
    assert (
        stored.outcome
        == recorded.outcome
        == Rejection(reason=RejectReason.NOT_IN_UNIVERSE, message="Not ours.", at=US_OPEN)
    )
    assert (stored.created, stored.target_weight) == (False, D("0.2"))
    assert arena.cash(US_OPEN) == D(10000)


def test_the_broker_refuses_another_markets_calendar(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="not the cn calendar"):
        PaperBroker(
            ledger=ledger,
            rules=CN,
            calendar=calendar_for(US.calendar_id),
            fill_price=lambda symbol, at: None,
        )
