"""A hand-built ledger with known NAVs, orders and fills, for the report and export tests.

Three US accounts trade AAPL over six daily slots (09:30 New York, 13:30 UTC, 2025-10-01..08) at
the prices in `AAPL`: `alpha` buys 10 at the first slot and holds, `beta` holds cash, `gamma`
buys 20 at slot 1, has one order rejected at slot 2 and sells its 20 at slot 3. One crypto account
(`alpha`) holds 0.1 BTC over three daily slots. Every cycle is `done`, with a slot snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from openbell.markets.domain import Instrument, Order, Rejection, RejectReason, Side, utc
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.store import fill_for

SLOTS = tuple(
    utc(2025, 10, day, 13, 30) for day in (1, 2, 3, 6, 7, 8)
)  # six XNYS sessions, 09:30 New York
AAPL = (Decimal(100), Decimal(102), Decimal(101), Decimal(105), Decimal(103), Decimal(108))
CRYPTO_SLOTS = tuple(utc(2025, 10, day) for day in (1, 2, 3))
BTC = (Decimal(60000), Decimal(63000), Decimal(61000))
INITIAL = Decimal(10000)

_AAPL = Instrument(symbol="AAPL", market="us", currency="USD")
_BTC = Instrument(symbol="BTC/USDT", market="crypto", currency="USDT")


@dataclass
class Built:
    """Account ids by (market, agent) and the NAV each slot snapshot should hold."""

    accounts: dict[tuple[str, str], int] = field(default_factory=dict)
    navs: dict[tuple[str, str], list[Decimal]] = field(default_factory=dict)


def _trade(
    ledger: Ledger,
    cycle_id: int,
    seq: int,
    instrument: Instrument,
    side: Side,
    quantity: Decimal,
    price: Decimal,
    at: datetime,
    confidence: str | None,
) -> None:
    order = Order(
        instrument=instrument,
        side=side,
        quantity=quantity,
        placed_at=at,
        reason="test",
        confidence=Decimal(confidence) if confidence is not None else None,
    )
    ledger.record_order(cycle_id=cycle_id, seq=seq, order=order, outcome=fill_for(order, price))


def build_ledger(ledger: Ledger) -> Built:
    """Fill `ledger` (migrated, empty) with the accounts described in the module docstring."""
    built = Built()
    now = SLOTS[0] - timedelta(days=1)
    for agent, kind in (("alpha", "buy_and_hold"), ("beta", "cash"), ("gamma", "random")):
        agent_id = ledger.ensure_agent(agent, kind, now)
        built.accounts["us", agent] = ledger.open_account(agent_id, "us", "USD", INITIAL, now)
    for index, (at, price) in enumerate(zip(SLOTS, AAPL, strict=True)):
        for agent in ("alpha", "beta", "gamma"):
            account_id = built.accounts["us", agent]
            cycle = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
            assert cycle is not None
            if agent == "alpha" and index == 0:
                _trade(ledger, cycle, 0, _AAPL, Side.BUY, Decimal(10), price, at, "0.8")
            if agent == "gamma" and index == 1:
                _trade(ledger, cycle, 0, _AAPL, Side.BUY, Decimal(20), price, at, "0.3")
            if agent == "gamma" and index == 2:
                order = Order(instrument=_AAPL, side=Side.BUY, quantity=Decimal(500), placed_at=at)
                rejection = Rejection(reason=RejectReason.INSUFFICIENT_CASH, message="no", at=at)
                ledger.record_order(cycle_id=cycle, seq=0, order=order, outcome=rejection)
            if agent == "gamma" and index == 3:
                _trade(ledger, cycle, 0, _AAPL, Side.SELL, Decimal(20), price, at, "0.6")
            snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {"AAPL": price})
            built.navs.setdefault(("us", agent), []).append(snapshot.nav)
            ledger.finish_cycle(cycle, CycleStatus.DONE, at)
    agent_id = ledger.ensure_agent("alpha", "buy_and_hold", now)
    account_id = ledger.open_account(agent_id, "crypto", "USDT", INITIAL, now)
    built.accounts["crypto", "alpha"] = account_id
    for index, (at, price) in enumerate(zip(CRYPTO_SLOTS, BTC, strict=True)):
        cycle = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
        assert cycle is not None
        if index == 0:
            _trade(ledger, cycle, 0, _BTC, Side.BUY, Decimal("0.1"), price, at, None)
        snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {"BTC/USDT": price})
        built.navs.setdefault(("crypto", "alpha"), []).append(snapshot.nav)
        ledger.finish_cycle(cycle, CycleStatus.DONE, at)
    return built
