"""Valuing accounts for their NAV snapshots: the marks at a slot and at a session's close.

This module owns which price values a holding (DESIGN §3 step 5): at a slot, the slot snapshot's
quote, else the close of the last bar ended by the slot; at a session close, the close of the last
bar ended by the close (over every interval the source serves; the latest end wins and a tie goes to
the finer interval). Every price comes through the point-in-time gateway at the snapshot's instant.
Snapshots are written through the ledger, which makes writing one twice a no-op.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from decimal import Decimal

import structlog

from openbell.daemon.error_policy import Action, Stage, action_for
from openbell.markets.domain import Quote
from openbell.markets.errors import DataUnavailable
from openbell.markets.gateway import MarketSnapshot, PointInTimeGateway
from openbell.store.ledger import Ledger
from openbell.store.records import NavSnapshot, SnapshotKind

log = structlog.stdlib.get_logger(__name__)


async def last_close_quotes(
    gateway: PointInTimeGateway, symbols: Iterable[str], at: datetime
) -> dict[str, Quote]:
    """Each symbol's last bar ended by `at`, as a quote of its close stamped with the bar's end,
    over every interval the source serves (the latest end wins; a tie goes to the finer interval).
    Symbols with no such bar are absent."""
    wanted = tuple(symbols)
    out: dict[str, Quote] = {}
    if not wanted:
        return out
    for interval in gateway.source.intervals:  # finest first
        found = await gateway.last_closes(wanted, interval, at)
        for symbol, quote in found.items():
            if symbol not in out or quote.at > out[symbol].at:
                out[symbol] = quote
    return {symbol: out[symbol] for symbol in wanted if symbol in out}


async def last_closes(
    gateway: PointInTimeGateway, symbols: Iterable[str], at: datetime
) -> dict[str, Decimal]:
    """The close of each symbol's last bar ended by `at` (see `last_close_quotes`)."""
    found = await last_close_quotes(gateway, symbols, at)
    return {symbol: quote.price for symbol, quote in found.items()}


def check_marks(
    account_id: int, held: Iterable[str], marks: Mapping[str, Decimal], at: datetime
) -> None:
    """Raise `DataUnavailable` naming every held symbol without a mark."""
    unpriced = sorted(symbol for symbol in held if symbol not in marks)
    if unpriced:
        raise DataUnavailable(f"account {account_id}: no price for held {unpriced} at {at}")


async def write_slot_snapshot(
    ledger: Ledger,
    gateway: PointInTimeGateway,
    snapshot: MarketSnapshot,
    account_id: int,
    *,
    cycle_id: int | None = None,
) -> NavSnapshot:
    """Write the account's `slot` NAV snapshot at `snapshot.at` (the stored one if it exists), by
    the cycle `cycle_id` when given (fenced: `ClaimLost` once its claim is lost).

    Raises `DataUnavailable` when a holding has no price at all.
    """
    at = snapshot.at
    held = ledger.account_state(account_id, at).positions
    marks = {symbol: snapshot.quotes[symbol].price for symbol in held if symbol in snapshot.quotes}
    unpriced = [symbol for symbol in held if symbol not in marks]
    if unpriced:
        marks.update(await last_closes(gateway, unpriced, at))
    check_marks(account_id, held, marks, at)
    return ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, marks, cycle_id=cycle_id)


async def write_close_snapshots(
    ledger: Ledger,
    gateway: PointInTimeGateway,
    close_at: datetime,
    account_ids: Collection[int],
) -> int:
    """Write each account's `close` NAV snapshot at a session's `close_at`; how many were new.

    A snapshot already written is left as it is. An account that cannot be valued is logged
    (`nav_snapshot_failed`) and skipped; operator and database errors raise (`action_for`).
    """
    pending = [
        account_id
        for account_id in account_ids
        if ledger.find_nav_snapshot(account_id, close_at, SnapshotKind.CLOSE) is None
    ]
    if not pending:
        return 0
    held = {
        account_id: tuple(ledger.account_state(account_id, close_at).positions)
        for account_id in pending
    }
    wanted = sorted({symbol for symbols in held.values() for symbol in symbols})
    closes = await last_closes(gateway, wanted, close_at)
    written = 0
    for account_id in pending:
        bound = log.bind(market=gateway.market, account_id=account_id, at=close_at)
        try:
            check_marks(account_id, held[account_id], closes, close_at)
            snapshot = ledger.write_nav_snapshot(account_id, close_at, SnapshotKind.CLOSE, closes)
        except Exception as exc:
            if action_for(Stage.SNAPSHOT, exc) is Action.STOP:
                raise
            bound.warning(
                "nav_snapshot_failed",
                kind=SnapshotKind.CLOSE.value,
                error_class=type(exc).__name__,
                error_message=str(exc),
            )
            continue
        written += 1
        bound.info("nav_snapshot_written", kind=SnapshotKind.CLOSE.value, nav=snapshot.nav)
    return written
