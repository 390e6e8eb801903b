"""Builders with defaults for the store tests: instruments, orders, fills, borrow fees charged as
the daemon charges them, and table dumps."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import Engine, delete, select
from sqlmodel import SQLModel

from openbell.markets.domain import CURRENCY_PLACES, Fill, Instrument, Order, Side, utc
from openbell.markets.rules import rules_for
from openbell.store import tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.margin_ledger import BorrowFee

NOW = utc(2025, 10, 1, 14, 30)

INSTRUMENTS: dict[str, tuple[Instrument, ...]] = {
    "us": tuple(
        Instrument(symbol=s, market="us", currency="USD") for s in ("AAPL", "MSFT", "NVDA")
    ),
    "cn": tuple(
        Instrument(symbol=s, market="cn", currency="CNY")
        for s in ("600519.SH", "601318.SH", "600036.SH")
    ),
    "crypto": tuple(
        Instrument(symbol=s, market="crypto", currency="USDT")
        for s in ("BTC/USDT", "ETH/USDT", "SOL/USDT")
    ),
}
CURRENCY = {"us": "USD", "cn": "CNY", "crypto": "USDT"}


def make_order(**overrides: Any) -> Order:
    """A 10-share AAPL buy placed at NOW, unless overridden."""
    order = Order(
        instrument=INSTRUMENTS["us"][0],
        side=Side.BUY,
        quantity=Decimal(10),
        placed_at=NOW,
        reason="test",
        confidence=Decimal("0.6"),
    )
    return replace(order, **overrides)


def fill_for(
    order: Order,
    price: Decimal,
    *,
    fees: Decimal = Decimal(0),
    at: datetime | None = None,
    quantity: Decimal | None = None,
) -> Fill:
    """The fill of `order` at `price`, with the notional rounded as execution rounds it."""
    amount = order.quantity if quantity is None else quantity
    currency = order.instrument.currency
    places = Decimal(1).scaleb(-CURRENCY_PLACES[currency])
    return Fill(
        symbol=order.instrument.symbol,
        side=order.side,
        quantity=amount,
        price=price,
        notional=(amount * price).quantize(places, rounding=ROUND_HALF_UP),
        fees=fees,
        currency=currency,
        filled_at=at or order.placed_at,
        price_source="quote",
    )


def charge_fees_due(
    ledger: Ledger, account_id: int, at: datetime, closes: Mapping[str, Decimal]
) -> list[BorrowFee]:
    """Charge the account's borrow fees due by `at`, as the daemon does before a NAV snapshot
    (`daemon/valuation.py`: `short_days_due`, then `charge_borrow_fees`, one fee per short and
    day by `markets.margin.borrow_fee` at the market's rules); each short is marked at `closes`,
    which stand for the last closes ended by the days charged. The fees written."""
    state = ledger.account_state(account_id, at)
    shorting = rules_for(state.market).shorting
    due = ledger.short_days_due(account_id, at)
    if shorting is None or not due:
        return []
    currency = state.cash.currency
    fees = [
        BorrowFee.of_short(
            account_id=account_id,
            day=short_day.day,
            symbol=symbol,
            quantity=quantity,
            price=closes[symbol],
            shorting=shorting,
            currency=currency,
            charged_at=at,
        )
        for short_day in due
        for symbol, quantity in short_day.shorts.items()
    ]
    return ledger.charge_borrow_fees(account_id, fees)


#: The cycle columns that say which run claimed a cycle and when: they differ between two runs
#: that write the same ledger.
CLAIM_COLUMNS = frozenset({"claimed_by", "lease_until", "started_at", "finished_at"})


def dump_tables(
    engine: Engine, *, leave_out: Collection[str] = ()
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table, in primary-key order, as exact Python values (without
    the columns named in `leave_out`)."""
    dump: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as connection:
        for table in SQLModel.metadata.sorted_tables:
            columns = [column for column in table.columns if column.name not in leave_out]
            query = select(*columns).order_by(*table.primary_key.columns)
            dump[table.name] = [tuple(row) for row in connection.execute(query)]
    return dump


def dump_ledger(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """`dump_tables` of the ledger at `url`, without the claim columns (`CLAIM_COLUMNS`)."""
    engine = make_engine(url)
    try:
        return dump_tables(engine, leave_out=CLAIM_COLUMNS)
    finally:
        engine.dispose()


def clear_tables(engine: Engine) -> None:
    """Delete every row of every store table (children first)."""
    with engine.begin() as connection:
        for table in reversed(SQLModel.metadata.sorted_tables):
            connection.execute(delete(table))
