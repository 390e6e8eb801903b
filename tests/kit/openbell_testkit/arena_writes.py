"""Writing to a ledger as a running daemon would, for the browser tests: through `Ledger`, the
store's facade (the methods the toolbox, the broker and the LLM agent's journal call), never by
raw SQL."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from openbell.markets.domain import Instrument, Order, Rejection, RejectReason, Side
from openbell.ops.web import read_model
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, CycleUsage, SnapshotKind, TraceEntry

HOLDER = "browser-test"


def ledger_of(db: Path) -> Ledger:
    return Ledger(make_engine(f"sqlite:///{db}"))


def last_slot(db: Path, market: str, agent: str) -> datetime:
    """The latest slot NAV snapshot of `agent` in `market`."""
    series = read_model.nav_series(make_engine(f"sqlite:///{db}"), agent, market)
    return series.slot[-1].at


def rejected_order_cycle(
    ledger: Ledger,
    *,
    agent: str,
    kind: str,
    market: str,
    at: datetime,
    reason: str,
    trace: tuple[tuple[str, str], ...] = (),
    usage: CycleUsage | None = None,
) -> int:
    """One finished cycle of `agent` (opened in `market` with 10,000 if new) at `at`: an order
    rejected for want of cash with `reason`, the (role, content) `trace` entries, `usage`, and
    the account's NAV snapshot. The cycle's id."""
    agent_id = ledger.ensure_agent(agent, kind, at)
    currency = {"us": "USD", "cn": "CNY", "crypto": "USDT"}[market]
    account_id = ledger.open_account(agent_id, market, currency, Decimal(10000), at)
    cycle_id = ledger.claim_cycle(account_id, at, HOLDER, at + timedelta(minutes=5), at)
    assert cycle_id is not None
    entries = [
        TraceEntry(cycle_id=cycle_id, role=role, at=at, content=text) for role, text in trace
    ]
    if trace:
        entries.append(
            TraceEntry(
                cycle_id=cycle_id,
                role="tool",
                at=at,
                tool="place_order",
                arguments='{"symbol": "QQQ", "reason": ' + json.dumps(reason) + "}",
                result=reason,
            )
        )
    if entries or usage is not None:
        ledger.append_journal(cycle_id, entries, usage)
    order = Order(
        instrument=Instrument(symbol="QQQ", market=market, currency=currency),
        side=Side.BUY,
        quantity=Decimal(1000),
        placed_at=at,
        reason=reason,
        confidence=Decimal("0.7"),
    )
    rejection = Rejection(reason=RejectReason.INSUFFICIENT_CASH, message="not enough cash", at=at)
    ledger.record_order(cycle_id=cycle_id, seq=0, order=order, outcome=rejection)
    ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {})
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, at, held_by=HOLDER)
    return cycle_id
