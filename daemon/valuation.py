"""Valuing accounts for their NAV snapshots: the marks at a slot and at a session's close.

This module owns which price values a holding (DESIGN §3 step 5): at a slot, the slot snapshot's
quote, else the close of the last bar ended by the slot; at a session close, the close of the last
bar ended by the close (over every interval the source serves; the latest end wins and a tie goes to
the finer interval). Every price comes through the point-in-time gateway at the snapshot's instant.
Snapshots are written through the ledger, which makes writing one twice a no-op.

Borrow fees (design §4) are charged here too, just before an account's first snapshot after a
calendar day (UTC) ended with shorts open (`charge_borrow_fees`): one fee per short and day,
`|q| x close x bps / 10000 / day_count`, the close being that of the last bar ended by the day's
end (point-in-time: never a mark the day had not seen). So every snapshot's cash includes the fees
charged at or before its instant, which is how `ledger verify` recomputes it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Final

import structlog

from openbell.daemon.error_policy import Action, Stage, action_for
from openbell.markets.domain import Quote
from openbell.markets.errors import DataUnavailable
from openbell.markets.gateway import MarketSnapshot, PointInTimeGateway
from openbell.markets.rules import ShortRules
from openbell.store.ledger import Ledger
from openbell.store.margin_ledger import BorrowFee, day_end
from openbell.store.records import NavSnapshot, SnapshotKind

log = structlog.stdlib.get_logger(__name__)
#: The standard logger behind `log`, whose level decides which of its lines are written.
_STDLIB_LOG: Final = logging.getLogger(__name__)


async def last_close_quotes(
    gateway: PointInTimeGateway, symbols: Iterable[str], at: datetime
) -> dict[str, Quote]:
    """Each symbol's last bar ended by `at`, as a quote of its close stamped with the bar's end,
    over every interval the source serves (the latest end wins; a tie goes to the finer interval).
    Symbols with no such bar are absent."""
    wanted = tuple(symbols)
    if not wanted:
        return {}
    return await gateway.latest_closes(wanted, at)


async def last_closes(
    gateway: PointInTimeGateway, symbols: Iterable[str], at: datetime
) -> dict[str, Decimal]:
    """The close of each symbol's last bar ended by `at` (the prices of `last_close_quotes`, read
    without a quote built: `PointInTimeGateway.latest_close_prices`)."""
    wanted = tuple(symbols)
    if not wanted:
        return {}
    return await gateway.latest_close_prices(wanted, at)


def check_marks(
    account_id: int, held: Iterable[str], marks: Mapping[str, Decimal], at: datetime
) -> None:
    """Raise `DataUnavailable` naming every held symbol without a mark."""
    unpriced = sorted(symbol for symbol in held if symbol not in marks)
    if unpriced:
        raise DataUnavailable(f"account {account_id}: no price for held {unpriced} at {at}")


async def charge_borrow_fees(
    ledger: Ledger,
    gateway: PointInTimeGateway,
    account_id: int,
    at: datetime,
    shorting: ShortRules | None,
) -> list[BorrowFee]:
    """Charge the account's borrow fees of every day ended by `at` it ended short and was not
    charged for, before its snapshots at `at` are written (none once one exists: its cash is
    final, and the fees wait for the next snapshot); the fees charged. `DataUnavailable` when a
    short has no close by its day's end."""
    if shorting is None:
        return []
    due = ledger.short_days_due(account_id, at)
    if not due or any(ledger.find_nav_snapshot(account_id, at, kind) for kind in SnapshotKind):
        return []
    currency = ledger.account_state(account_id, at).cash.currency
    fees: list[BorrowFee] = []
    for short_day in due:
        end = day_end(short_day.day)
        marks = await last_closes(gateway, short_day.shorts, end)
        check_marks(account_id, short_day.shorts, marks, end)
        fees.extend(
            BorrowFee.of_short(
                account_id=account_id,
                day=short_day.day,
                symbol=symbol,
                quantity=quantity,
                price=marks[symbol],
                shorting=shorting,
                currency=currency,
                charged_at=at,
            )
            for symbol, quantity in short_day.shorts.items()
        )
    charged = ledger.charge_borrow_fees(account_id, fees)
    if charged:
        log.info(
            "borrow_fees_charged",
            account_id=account_id,
            at=at,
            fees=len(charged),
            amount=str(sum(fee.amount for fee in charged)),
        )
    return charged


async def write_slot_snapshot(
    ledger: Ledger,
    gateway: PointInTimeGateway,
    snapshot: MarketSnapshot,
    account_id: int,
    shorting: ShortRules | None = None,
    *,
    cycle_id: int | None = None,
) -> NavSnapshot:
    """Write the account's `slot` NAV snapshot at `snapshot.at` (the stored one if it exists),
    after charging the borrow fees due by then (with `shorting`, the market's rules for it), by the
    cycle `cycle_id` when given (fenced: `ClaimLost` once its claim is lost).

    Raises `DataUnavailable` when a holding has no price at all.
    """
    at = snapshot.at
    await charge_borrow_fees(ledger, gateway, account_id, at, shorting)
    held = ledger.open_positions(account_id)
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
    shorting: ShortRules | None = None,
) -> int:
    """Write each account's `close` NAV snapshot at a session's `close_at`; how many were new.

    A snapshot already written is left as it is. With `shorting`, the borrow fees due by
    `close_at` are charged first. An account that cannot be valued is logged
    (`nav_snapshot_failed`) and skipped; operator and database errors raise (`action_for`).
    """
    pending = [
        account_id
        for account_id in account_ids
        if ledger.find_nav_snapshot(account_id, close_at, SnapshotKind.CLOSE) is None
    ]
    if not pending:
        return 0
    held = {account_id: tuple(ledger.open_positions(account_id)) for account_id in pending}
    wanted = sorted({symbol for symbols in held.values() for symbol in symbols})
    closes = await last_closes(gateway, wanted, close_at)
    written = 0
    market = gateway.market
    for account_id in pending:
        try:
            if shorting is not None:  # else there is nothing to charge
                await charge_borrow_fees(ledger, gateway, account_id, close_at, shorting)
            check_marks(account_id, held[account_id], closes, close_at)
            snapshot = ledger.write_nav_snapshot(account_id, close_at, SnapshotKind.CLOSE, closes)
        except Exception as exc:
            if action_for(Stage.SNAPSHOT, exc) is Action.STOP:
                raise
            log.warning(
                "nav_snapshot_failed",
                market=market,
                account_id=account_id,
                at=close_at,
                kind=SnapshotKind.CLOSE.value,
                error_class=type(exc).__name__,
                error_message=str(exc),
            )
            continue
        written += 1
        if _STDLIB_LOG.isEnabledFor(logging.INFO):  # not assembled when the level filters it out
            log.info(
                "nav_snapshot_written",
                market=market,
                account_id=account_id,
                at=close_at,
                kind=SnapshotKind.CLOSE.value,
                nav=snapshot.nav,
            )
    return written
