"""Borrow fees and margin calls of shorting accounts: their rows, written and read back.

This module owns the `borrow_fee` and `margin_call` tables (migration 0016) on behalf of `Ledger`
(of which `MarginLedger` is a part), and the records they are read back as (`BorrowFee`,
`MarginCall`, `ShortDay`):

- `short_days_due(account_id, until)` lists each calendar day (UTC) not charged yet whose end is
  at or before `until` and at whose end the account held a short, with its short quantities at
  that instant (every fill before it, plus corporate actions with an earlier ex time: the holding
  the day ended with, whatever was traded since).
- `charge_borrow_fees` writes a set of fees in one transaction, taking their sum from cash; a fee
  of a (symbol, day) already charged is skipped (the unique key of `borrow_fee`), so charging
  twice changes nothing. Cash is never taken below zero (`LedgerBreach`, nothing written).
- `record_margin_cover` records a cover the daemon places for a margin call as order `seq` (a
  negative number: the system's orders of a cycle, apart from the agent's 1, 2, ...) of the cycle,
  with its fill and, when it filled, its `margin_call` row, in one transaction (at most once per
  idempotency key, as any order); `margin_calls` and `borrow_fees` read them back.
- `latest_nav_snapshot` is the account's newest NAV snapshot before an instant: the one a margin
  call is decided on.

The amounts themselves are computed by `markets.margin` (pure); the verifier recomputes them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import BindParameter, Connection, bindparam, func, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import Fill, Order, Rejection, Side, check_decimal, check_utc
from openbell.markets.errors import LedgerBreach
from openbell.markets.margin import borrow_fee
from openbell.markets.rules import ShortRules
from openbell.store.core_tables import (
    BORROW_FEE_TABLE,
    CORPORATE_ACTION_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_SNAPSHOT_TABLE,
)
from openbell.store.orders import check_outcome, idempotency_key, insert_order, stored_order
from openbell.store.records import NavSnapshot, RecordedOrder, SnapshotKind
from openbell.store.rows import LedgerTables, get_account, row_id
from openbell.store.snapshots import stored_snapshot

#: The prefix of the reason of every order a margin call places (and of its `margin_call` row).
MARGIN_CALL_REASON: Final = "margin call"


def day_end(day: date) -> datetime:
    """The instant calendar day `day` (UTC) ends: the next midnight UTC."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)


def last_ended_day(until: datetime) -> date:
    """The last calendar day (UTC) that has ended by `until`."""
    check_utc("until", until)
    return until.astimezone(UTC).date() - timedelta(days=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShortDay:
    """A calendar day (UTC) ended with shorts open: each short symbol's (negative) quantity."""

    day: date
    shorts: dict[str, Decimal]


@dataclass(frozen=True, slots=True, kw_only=True)
class BorrowFee:
    """The borrow fee of a short of `symbol` held at the end of `day`, charged at `charged_at`.

    `quantity` is negative (the short), `price` the mark used, `amount` what cash paid
    (`markets.margin.borrow_fee`). `fee_id` is None before it is stored.
    """

    account_id: int
    symbol: str
    day: date
    quantity: Decimal
    price: Decimal
    rate_bps: Decimal
    day_count: int
    amount: Decimal
    currency: str
    charged_at: datetime
    fee_id: int | None = None

    def __post_init__(self) -> None:
        check_utc("charged_at", self.charged_at)
        if self.quantity >= 0:
            raise ValueError(f"a borrow fee is charged on a short, got quantity {self.quantity}")
        check_decimal("price", self.price, positive=True)
        check_decimal("rate_bps", self.rate_bps)
        check_decimal("amount", self.amount)
        if self.day_count <= 0:
            raise ValueError(f"day_count must be positive, got {self.day_count}")
        if self.charged_at < day_end(self.day):
            raise ValueError(
                f"the fee of {self.day} is charged at {self.charged_at}, before the day ended"
            )

    @classmethod
    def of_short(
        cls,
        *,
        account_id: int,
        day: date,
        symbol: str,
        quantity: Decimal,
        price: Decimal,
        shorting: ShortRules,
        currency: str,
        charged_at: datetime,
    ) -> BorrowFee:
        """The fee of a short of `quantity` `symbol` held at the end of `day`, marked at `price`,
        under the market's `shorting` rules (`markets.margin.borrow_fee`)."""
        return cls(
            account_id=account_id,
            symbol=symbol,
            day=day,
            quantity=quantity,
            price=price,
            rate_bps=shorting.borrow_fee_bps_per_year,
            day_count=shorting.day_count,
            amount=borrow_fee(quantity, price, shorting, currency),
            currency=currency,
            charged_at=charged_at,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MarginCall:
    """A short covered by a margin call: the cover `order_id` of `cycle_id`, placed at `at`, when
    the account's `equity` was below its maintenance `requirement`."""

    account_id: int
    cycle_id: int
    order_id: int
    at: datetime
    equity: Decimal
    requirement: Decimal
    reason: str
    call_id: int | None = None

    def __post_init__(self) -> None:
        check_utc("at", self.at)
        if not self.reason.startswith(MARGIN_CALL_REASON):
            raise ValueError(f"a margin call's reason starts {MARGIN_CALL_REASON!r}")


class MarginLedger(LedgerTables):
    """Borrow fees and margin calls (see the module docstring)."""

    def short_days_due(self, account_id: int, until: datetime) -> list[ShortDay]:
        """Each day ended by `until`, after the account's last charged day, that it ended short."""
        last_day = last_ended_day(until)
        with self._engine.connect() as connection:
            return short_days(connection, account_id, last_day)

    def charge_borrow_fees(self, account_id: int, fees: Sequence[BorrowFee]) -> list[BorrowFee]:
        """Charge `fees` (all of `account_id`) from its cash in one transaction; the fees written
        (those charged before are skipped). `LedgerBreach`, nothing written, when cash would go
        below zero."""
        if any(fee.account_id != account_id for fee in fees):
            raise ValueError(f"every fee must be of account {account_id}")
        if not fees:
            return []
        try:
            with self._write() as session:
                account = get_account(session, account_id, lock=True)
                connection = session.connection()
                return insert_fees(connection, account_id, account.cash, fees, session=account)
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = _charged(connection, account_id)
            if all((fee.symbol, fee.day) in stored for fee in fees):
                return []
            raise

    def borrow_fees(self, account_id: int) -> list[BorrowFee]:
        """Every borrow fee the account was charged, by day and symbol."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(BORROW_FEE_TABLE)
                .where(BORROW_FEE_TABLE.c.account_id == account_id)
                .order_by(BORROW_FEE_TABLE.c.day, BORROW_FEE_TABLE.c.symbol)
            )
            return [_fee(row) for row in rows]

    def record_margin_cover(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        outcome: Fill | Rejection,
        equity: Decimal,
        requirement: Decimal,
    ) -> RecordedOrder:
        """Record the margin call's cover `order` as order `seq` (< 0) of `cycle_id` with its
        outcome and, for a fill, its `margin_call` row (`equity` below `requirement`, the order's
        reason), in one transaction. Idempotent like `record_order`: a key already recorded
        returns its stored outcome (`created=False`) and writes nothing; fenced like it too
        (`ClaimLost`, nothing written, once this ledger's claim of the cycle is lost)."""
        if seq >= 0:
            raise ValueError(f"a margin call's order has a negative seq, got {seq}")
        if order.side is not Side.COVER or not order.reason.startswith(MARGIN_CALL_REASON):
            raise ValueError("a margin call places covers whose reason is the margin call's")
        from openbell.store.tables import CycleRow  # the ORM, where a row object is needed

        key = idempotency_key(cycle_id, seq)
        try:
            with self._write() as session:
                cycle = session.get(CycleRow, cycle_id)
                if cycle is None:
                    raise ValueError(f"no cycle {cycle_id}")
                account = get_account(session, cycle.account_id, lock=True)
                connection = session.connection()
                self._check_fences(connection, [cycle_id])  # as every order of a claimed cycle
                stored = stored_order(connection, key)
                if stored is not None:
                    return stored
                account_id = row_id(account.id)
                check_outcome(account_id, account.market, account.currency, order, outcome)
                recorded = insert_order(session, account, cycle_id, seq, key, order, outcome, None)
                if isinstance(outcome, Fill):
                    call = MarginCall(
                        account_id=account_id,
                        cycle_id=cycle_id,
                        order_id=recorded.order_id,
                        at=order.placed_at,
                        equity=equity,
                        requirement=requirement,
                        reason=order.reason,
                    )
                    connection.execute(MARGIN_CALL_TABLE.insert(), _call_values(call))
                return recorded
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_order(connection, key)
            if stored is None:
                raise
            return stored

    def margin_calls(self, account_id: int) -> list[MarginCall]:
        """Every margin-call cover of the account, oldest first."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(MARGIN_CALL_TABLE)
                .where(MARGIN_CALL_TABLE.c.account_id == account_id)
                .order_by(MARGIN_CALL_TABLE.c.id)
            )
            return [_call(row._mapping) for row in rows]

    def latest_nav_snapshot(self, account_id: int, before: datetime) -> NavSnapshot | None:
        """The account's newest NAV snapshot (of either kind) at or before `before`."""
        check_utc("before", before)
        with self._engine.connect() as connection:
            row = connection.execute(
                _LATEST, {"account": account_id, "before": before}
            ).one_or_none()
            if row is None:
                return None
            return stored_snapshot(connection, account_id, row.at, SnapshotKind(row.kind))


def short_days(connection: Connection, account_id: int, last_day: date) -> list[ShortDay]:
    """The days up to `last_day`, after the account's last charged day, it ended short."""
    charged = connection.execute(_LAST_CHARGED, {"account": account_id}).scalar_one()
    first_short = connection.execute(_FIRST_SHORT, {"account": account_id}).scalar_one()
    if first_short is None:
        return []
    first_day = first_short.astimezone(UTC).date()
    if charged is not None:
        first_day = max(first_day, charged + timedelta(days=1))
    if first_day > last_day:
        return []
    until = day_end(last_day)
    events: list[tuple[datetime, str, Decimal]] = []
    for fill in connection.execute(_FILLS, {"account": account_id, "until": until}):
        sign = 1 if fill.side in (Side.BUY.value, Side.COVER.value) else -1
        events.append((fill.filled_at, fill.symbol, sign * fill.quantity))
    for action in connection.execute(_ACTIONS, {"account": account_id, "until": until}):
        events.append((action.ex_at, action.symbol, action.quantity_delta))
    events.sort(key=lambda event: event[0])
    held: dict[str, Decimal] = defaultdict(Decimal)
    out: list[ShortDay] = []
    index = 0
    day = first_day
    while day <= last_day:
        end = day_end(day)
        while index < len(events) and events[index][0] < end:
            _at, symbol, delta = events[index]
            held[symbol] += delta
            index += 1
        shorts = {symbol: q for symbol, q in sorted(held.items()) if q < 0}
        if shorts:
            out.append(ShortDay(day=day, shorts=shorts))
        day += timedelta(days=1)
    return out


def insert_fees(
    connection: Connection,
    account_id: int,
    cash: Decimal,
    fees: Sequence[BorrowFee],
    *,
    session: Any,
) -> list[BorrowFee]:
    """Write the fees not charged before and take them from the locked account's cash (`session`
    is its row, whose cash is set); the fees written."""
    stored = _charged(connection, account_id)
    new = [fee for fee in fees if (fee.symbol, fee.day) not in stored]
    if not new:
        return []
    total = sum((fee.amount for fee in new), Decimal(0))
    if cash - total < 0:
        raise LedgerBreach(
            f"account {account_id}: borrow fees of {total} would leave cash at {cash - total}"
        )
    after = connection.execute(_LAST_FILL, {"account": account_id}).scalar_one()
    written: list[BorrowFee] = []
    for fee in new:
        values = _fee_values(fee, after)
        result = connection.execute(BORROW_FEE_TABLE.insert(), values)
        inserted = result.inserted_primary_key
        written.append(_fee({**values, "id": row_id(None if inserted is None else inserted[0])}))
    session.cash = cash - total
    return written


def _fee_values(fee: BorrowFee, after_fill_id: int | None) -> dict[str, Any]:
    return {
        "account_id": fee.account_id,
        "symbol": fee.symbol,
        "day": fee.day,
        "quantity": fee.quantity,
        "price": fee.price,
        "rate_bps": fee.rate_bps,
        "day_count": fee.day_count,
        "amount": fee.amount,
        "currency": fee.currency,
        "after_fill_id": after_fill_id,
        "charged_at": fee.charged_at,
    }


def _fee(row: Any) -> BorrowFee:
    values = row if isinstance(row, dict) else row._mapping
    return BorrowFee(
        account_id=values["account_id"],
        symbol=values["symbol"],
        day=values["day"],
        quantity=values["quantity"],
        price=values["price"],
        rate_bps=values["rate_bps"],
        day_count=values["day_count"],
        amount=values["amount"],
        currency=values["currency"],
        charged_at=values["charged_at"],
        fee_id=values["id"],
    )


def _call_values(call: MarginCall) -> dict[str, Any]:
    return {
        "account_id": call.account_id,
        "cycle_id": call.cycle_id,
        "order_id": call.order_id,
        "at": call.at,
        "equity": call.equity,
        "requirement": call.requirement,
        "reason": call.reason,
    }


def _call(values: Any) -> MarginCall:
    return MarginCall(
        account_id=values["account_id"],
        cycle_id=values["cycle_id"],
        order_id=values["order_id"],
        at=values["at"],
        equity=values["equity"],
        requirement=values["requirement"],
        reason=values["reason"],
        call_id=values["id"],
    )


def _charged(connection: Connection, account_id: int) -> set[tuple[str, date]]:
    return {
        (row.symbol, row.day)
        for row in connection.execute(
            select(BORROW_FEE_TABLE.c.symbol, BORROW_FEE_TABLE.c.day).where(
                BORROW_FEE_TABLE.c.account_id == account_id
            )
        )
    }


_ACCOUNT: Final[BindParameter[int]] = bindparam("account")
_LAST_CHARGED: Final = select(func.max(BORROW_FEE_TABLE.c.day)).where(
    BORROW_FEE_TABLE.c.account_id == _ACCOUNT
)
_FIRST_SHORT: Final = select(func.min(FILL_TABLE.c.filled_at)).where(
    FILL_TABLE.c.account_id == _ACCOUNT, FILL_TABLE.c.side == Side.SHORT.value
)
_FILLS: Final = (
    select(FILL_TABLE.c.symbol, FILL_TABLE.c.side, FILL_TABLE.c.quantity, FILL_TABLE.c.filled_at)
    .where(FILL_TABLE.c.account_id == _ACCOUNT, FILL_TABLE.c.filled_at < bindparam("until"))
    .order_by(FILL_TABLE.c.id)
)
_ACTIONS: Final = select(
    CORPORATE_ACTION_TABLE.c.symbol,
    CORPORATE_ACTION_TABLE.c.quantity_delta,
    CORPORATE_ACTION_TABLE.c.ex_at,
).where(
    CORPORATE_ACTION_TABLE.c.account_id == _ACCOUNT,
    CORPORATE_ACTION_TABLE.c.ex_at < bindparam("until"),
)
_LAST_FILL: Final = select(func.max(FILL_TABLE.c.id)).where(FILL_TABLE.c.account_id == _ACCOUNT)
_LATEST: Final = (
    select(NAV_SNAPSHOT_TABLE.c.at, NAV_SNAPSHOT_TABLE.c.kind)
    .where(
        NAV_SNAPSHOT_TABLE.c.account_id == _ACCOUNT,
        NAV_SNAPSHOT_TABLE.c.at <= bindparam("before"),
    )
    .order_by(NAV_SNAPSHOT_TABLE.c.at.desc(), NAV_SNAPSHOT_TABLE.c.id.desc())
    .limit(1)
)
