"""The paper ledger: agents, accounts, cycle claims, orders with their fills, corporate actions
and NAV snapshots.

`Ledger` is the only writer of trading state and the only place that turns rows into domain
values (`AccountState`, `Fill`, `Rejection`) and store records (`RecordedOrder`, `NavSnapshot`).
Each order is one transaction: the order row, its fill, the cash change and the position change
commit together or not at all, under an idempotency key (`"{cycle_id}:{seq}"`) that makes a
retried call return the stored outcome and change nothing. Writes lock the account row first
(`SELECT ... FOR UPDATE` on Postgres, `BEGIN IMMEDIATE` on SQLite), so writers of one account run
one at a time and fill ids grow in commit order; a unique-key violation left over from a race is
answered with the stored row. The ledger refuses (with `LedgerBreach`, writing nothing) an order
that would make cash or a holding negative; the rules should have rejected it. A split or cash
dividend is applied the same way: one transaction per (account, action), at most once
(`entitlements.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Final

from sqlalchemy import Engine, bindparam, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from openbell.markets.corporate_actions import CorporateAction
from openbell.markets.domain import (
    AccountState,
    Fill,
    Lot,
    Money,
    Order,
    Position,
    Rejection,
    Side,
    check_currency,
    check_decimal,
    check_market,
    check_utc,
)
from openbell.store.cycles import (
    count_cycles,
    find_cycle,
    finish_cycle,
    insert_cycle,
    set_lease,
    take_over,
    take_over_expired,
)
from openbell.store.db import SQLITE_IMMEDIATE
from openbell.store.entitlements import (
    check_order,
    entitled_quantity,
    insert_action,
    stored_action,
)
from openbell.store.masking_keys import MaskingKey, read_masking_key, save_masking_key
from openbell.store.postings import (
    check_outcome,
    cycle_orders,
    get_account,
    insert_order,
    orders_before,
    row_id,
    stored_order,
)
from openbell.store.records import (
    AppliedAction,
    CycleRecord,
    CycleStatus,
    CycleUsage,
    NavSnapshot,
    RecordedOrder,
    SnapshotKind,
    TraceEntry,
)
from openbell.store.snapshots import POSITIONS, insert_snapshot, locked_cash, stored_snapshot
from openbell.store.tables import ACCOUNT_TABLE, FILL_TABLE, AccountRow, AgentRow, CycleRow
from openbell.store.traces import append_journal, cycle_traces, usage_of


def idempotency_key(cycle_id: int, seq: int) -> str:
    """The key that makes recording order `seq` of cycle `cycle_id` happen at most once."""
    return f"{cycle_id}:{seq}"


def recent_buys_since(now: datetime) -> datetime:
    """Start of the window whose buy fills `account_state` lists as `recent_buys`.

    The window opens at 00:00 UTC of the day before `now`. Every US and A-share session lies
    within one UTC day, so this always covers the current session (all T+1 needs) and the previous
    calendar day; the execution rules decide which of the listed lots are still locked.
    """
    check_utc("now", now)
    return datetime.combine(now.date() - timedelta(days=1), time(0), tzinfo=UTC)


class Ledger:
    """The exact paper ledger on one engine (SQLite or Postgres), at the migrations' head."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self._engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session

    # -- agents and accounts ---------------------------------------------------------------

    def ensure_agent(self, name: str, kind: str, now: datetime) -> int:
        """The id of the agent called `name`, created (with `kind`) if it does not exist yet.

        An existing agent keeps the kind it was created with.
        """
        check_utc("now", now)
        if not name or name != name.strip():
            raise ValueError(f"agent name must be non-empty and trimmed, got {name!r}")
        found = self._agentrow_id(name)
        if found is not None:
            return found
        try:
            with self._write() as session:
                row = AgentRow(name=name, kind=kind, created_at=now)
                session.add(row)
                session.flush()
                return row_id(row.id)
        except IntegrityError:
            found = self._agentrow_id(name)
            if found is None:
                raise
            return found

    def _agentrow_id(self, name: str) -> int | None:
        with self._read() as session:
            return session.exec(select(AgentRow.id).where(AgentRow.name == name)).first()

    def open_account(
        self, agent_id: int, market: str, currency: str, initial_cash: Decimal, now: datetime
    ) -> int:
        """The id of `agent_id`'s account in `market`, opened with `initial_cash` if new.

        Idempotent on (agent, market): an existing account is returned unchanged.
        """
        check_market(market)
        check_currency(currency)
        check_decimal("initial_cash", initial_cash)
        check_utc("now", now)
        found = self._accountrow_id(agent_id, market)
        if found is not None:
            return found
        try:
            with self._write() as session:
                row = AccountRow(
                    agent_id=agent_id,
                    market=market,
                    currency=currency,
                    initial_cash=initial_cash,
                    cash=initial_cash,
                    paused=False,
                    created_at=now,
                )
                session.add(row)
                session.flush()
                return row_id(row.id)
        except IntegrityError:
            found = self._accountrow_id(agent_id, market)
            if found is None:
                raise
            return found

    def _accountrow_id(self, agent_id: int, market: str) -> int | None:
        with self._read() as session:
            query = select(AccountRow.id).where(
                AccountRow.agent_id == agent_id, AccountRow.market == market
            )
            return session.exec(query).first()

    def account_state(self, account_id: int, now: datetime) -> AccountState:
        """Cash (the stored balance) and open positions with buys since `recent_buys_since`.

        Prebuilt Core statements in one read transaction: agents read their account several
        times a cycle, so this is on the hot path.
        """
        since = recent_buys_since(now)
        with self._engine.connect() as connection:
            account = connection.execute(_ACCOUNT, {"account": account_id}).one_or_none()
            if account is None:
                raise ValueError(f"no account {account_id}")
            rows = connection.execute(POSITIONS, {"account": account_id}).all()
            buys = connection.execute(_RECENT_BUYS, {"account": account_id, "since": since}).all()
        lots: dict[str, list[Lot]] = {}
        for buy in buys:
            lots.setdefault(buy.symbol, []).append(
                Lot(quantity=buy.quantity, acquired_at=buy.filled_at)
            )
        positions = {
            row.symbol: Position(
                symbol=row.symbol,
                quantity=row.quantity,
                cost=row.cost,
                recent_buys=tuple(lots.get(row.symbol, ())),
            )
            for row in rows
            if row.quantity > 0
        }
        return AccountState(
            market=account.market,
            cash=Money(amount=account.cash, currency=account.currency),
            positions=positions,
        )

    # -- cycles ----------------------------------------------------------------------------

    def claim_cycle(
        self,
        account_id: int,
        slot_at: datetime,
        claimed_by: str,
        lease_until: datetime,
        now: datetime,
    ) -> int | None:
        """Claim the cycle of `account_id` at `slot_at`; its id, or None if someone else holds it.

        The insert under the unique (account, slot) constraint decides the winner. A cycle still
        `claimed` whose lease ended before `now` was abandoned: it is taken over (new holder and
        lease, same id) so the caller can complete it; idempotency keys keep its orders single.
        """
        for name, value in (("slot_at", slot_at), ("lease_until", lease_until), ("now", now)):
            check_utc(name, value)
        try:
            with self._writer.begin() as connection:
                return insert_cycle(
                    connection,
                    account_id=account_id,
                    slot_at=slot_at,
                    status=CycleStatus.CLAIMED.value,
                    claimed_by=claimed_by,
                    lease_until=lease_until,
                    started_at=now,
                )
        except IntegrityError:
            pass
        with self._writer.begin() as connection:
            return take_over_expired(connection, account_id, slot_at, claimed_by, lease_until, now)

    def find_cycle(self, account_id: int, slot_at: datetime) -> CycleRecord | None:
        """The cycle of `account_id` at `slot_at`, or None when nobody has claimed it."""
        check_utc("slot_at", slot_at)
        with self._engine.connect() as connection:
            return find_cycle(connection, account_id, slot_at)

    def take_over_cycle(self, cycle_id: int, claimed_by: str, lease_until: datetime) -> bool:
        """Take the claim of a cycle still `claimed`, whatever its lease says; True if taken.

        For a caller that knows the holder is dead: a resumed replay, whose run owns its ledger.
        A live daemon instead waits for the lease to end and lets `claim_cycle` take it over. A
        cycle that has finished is left alone (False).
        """
        check_utc("lease_until", lease_until)
        with self._writer.begin() as connection:
            return take_over(connection, cycle_id, claimed_by, lease_until)

    def renew_claims(
        self, cycle_ids: Collection[int], held_by: str, lease_until: datetime
    ) -> set[int]:
        """Extend to `lease_until` the lease of the cycles in `cycle_ids` still `claimed` by
        `held_by`; their ids (a missing id is a claim lost to another run, or finished)."""
        check_utc("lease_until", lease_until)
        with self._writer.begin() as connection:
            return set_lease(connection, cycle_ids, held_by, lease_until)

    def release_claims(self, cycle_ids: Collection[int], held_by: str, now: datetime) -> set[int]:
        """End at `now` the lease of the cycles in `cycle_ids` still `claimed` by `held_by`, so
        that any run may take them over; their ids."""
        check_utc("now", now)
        with self._writer.begin() as connection:
            return set_lease(connection, cycle_ids, held_by, now - timedelta(microseconds=1))

    def record_missed(
        self, account_id: int, slot_at: datetime, now: datetime, *, reason: str = "daemon_down"
    ) -> int | None:
        """Record that the cycle of `account_id` at `slot_at` never ran; its id, or None when the
        cycle already has a row (claimed, finished or missed before): a slot is recorded once."""
        for name, value in (("slot_at", slot_at), ("now", now)):
            check_utc(name, value)
        try:
            with self._writer.begin() as connection:
                return insert_cycle(
                    connection,
                    account_id=account_id,
                    slot_at=slot_at,
                    status=CycleStatus.MISSED.value,
                    claimed_by="",
                    lease_until=now,
                    started_at=now,
                    finished_at=now,
                    reason=reason,
                )
        except IntegrityError:
            if self.find_cycle(account_id, slot_at) is None:
                raise
            return None

    def count_cycles(
        self,
        account_ids: Collection[int],
        *,
        start_at: datetime,
        end_at: datetime | None = None,
    ) -> int:
        """How many cycles of `account_ids` have a slot in `[start_at, end_at)` (no end: ever)."""
        check_utc("start_at", start_at)
        if end_at is not None:
            check_utc("end_at", end_at)
        if not account_ids:
            return 0
        with self._engine.connect() as connection:
            return count_cycles(connection, account_ids, start_at, end_at)

    def finish_cycle(
        self,
        cycle_id: int,
        status: CycleStatus,
        now: datetime,
        *,
        error_class: str | None = None,
        error_message: str | None = None,
        reason: str | None = None,
        held_by: str | None = None,
    ) -> bool:
        """Close a claimed cycle with a terminal `status` (and error or reason, when relevant).

        Finishing it again with the same status changes nothing; a different status raises. With
        `held_by`, a run finishes only a claim it still holds: False once it has lost it.
        """
        check_utc("now", now)
        status = CycleStatus(status)
        if status is CycleStatus.CLAIMED:
            raise ValueError("finish_cycle needs a terminal status, not 'claimed'")
        with self._writer.begin() as connection:
            return finish_cycle(
                connection,
                cycle_id,
                status,
                now,
                error_class=error_class,
                error_message=error_message,
                reason=reason,
                held_by=held_by,
            )

    # -- orders ----------------------------------------------------------------------------

    def record_order(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        outcome: Fill | Rejection,
        target_weight: Decimal | None = None,
    ) -> RecordedOrder:
        """Record order `seq` of a cycle with its outcome, in one transaction.

        A fill also moves the account's cash by `fill.cash_delta` and updates the position
        (quantity, average cost). If the idempotency key `"{cycle_id}:{seq}"` exists, the stored
        outcome is returned (`created=False`) and nothing changes. Raises `ValueError` when the
        outcome does not belong to the order or account, and `LedgerBreach` when a fill would
        make cash or a holding negative.
        """
        key = idempotency_key(cycle_id, seq)
        try:
            with self._write() as session:
                cycle = session.get(CycleRow, cycle_id)
                if cycle is None:
                    raise ValueError(f"no cycle {cycle_id}")
                account = get_account(session, cycle.account_id, lock=True)
                stored = stored_order(session.connection(), key)
                if stored is not None:
                    return stored
                check_outcome(account, order, outcome)
                return insert_order(
                    session, account, cycle_id, seq, key, order, outcome, target_weight
                )
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_order(connection, key)
            if stored is None:
                raise
            return stored

    def recorded_order(self, cycle_id: int, seq: int) -> RecordedOrder | None:
        """Order `seq` of cycle `cycle_id` as stored (`created=False`), or None if not recorded."""
        with self._engine.connect() as connection:
            return stored_order(connection, idempotency_key(cycle_id, seq))

    def cycle_orders(self, cycle_id: int) -> list[RecordedOrder]:
        """Every order recorded in cycle `cycle_id`, with its outcome, in `seq` order."""
        with self._engine.connect() as connection:
            return cycle_orders(connection, cycle_id)

    def recent_orders(self, account_id: int, before: datetime, limit: int) -> list[RecordedOrder]:
        """The account's latest `limit` orders placed before `before`, newest first, with their
        outcomes (point-in-time: an order placed at `before` or later is not among them)."""
        check_utc("before", before)
        if limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        with self._engine.connect() as connection:
            return orders_before(connection, account_id, before, limit)

    def cycle_account_id(self, cycle_id: int) -> int:
        """The account cycle `cycle_id` belongs to; `ValueError` when there is no such cycle."""
        with self._read() as session:
            account_id = session.exec(
                select(CycleRow.account_id).where(CycleRow.id == cycle_id)
            ).first()
        if account_id is None:
            raise ValueError(f"no cycle {cycle_id}")
        return account_id

    # -- corporate actions (store/entitlements.py) -------------------------------------------

    def apply_corporate_action(
        self,
        account_id: int,
        action: CorporateAction,
        *,
        at: datetime,
        price: Decimal | None = None,
        step: Decimal = Decimal(1),
    ) -> AppliedAction | None:
        """Apply `action` to what the account held of its symbol before `action.ex_at`, in one
        transaction: the cash moves by the dividend (or by the cash paid for the fraction of a
        share a split leaves, at `price`), the position by the split's new shares (whole multiples
        of `step`), and one `corporate_action` entry stamped `at` records it.

        Idempotent: an action applied before returns its entry (`created=False`) and changes
        nothing. None, and nothing written, when nothing was held before the ex-date. Raises
        `ValueError` for an action in another currency, one applied after a later action of its
        symbol, or a split leaving a fraction without a `price`.
        """
        check_utc("at", at)
        try:
            with self._write() as session:
                account = get_account(session, account_id, lock=True)
                connection = session.connection()
                stored = stored_action(connection, account_id, action)
                if stored is not None:
                    return stored
                check_order(connection, account_id, action)
                held = entitled_quantity(connection, account_id, action.symbol, action.ex_at)
                if held <= 0:
                    return None
                return insert_action(session, account, action, held, at=at, price=price, step=step)
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_action(connection, account_id, action)
            if stored is None:
                raise
            return stored

    def symbols_traded(
        self, account_ids: Collection[int]
    ) -> tuple[frozenset[str], datetime | None]:
        """The symbols the accounts ever filled, and their first fill's time (None: no fill).

        Only these can have been held on an ex-date, and not before that time.
        """
        if not account_ids:
            return frozenset(), None
        ids = list(account_ids)
        with self._engine.connect() as connection:
            symbols = connection.execute(_TRADED, {"accounts": ids}).scalars().all()
            first = connection.execute(_FIRST_FILL, {"accounts": ids}).scalar_one()
        return frozenset(symbols), first

    # -- traces and LLM usage (store/traces.py) ---------------------------------------------

    def append_journal(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None = None
    ) -> tuple[TraceEntry, ...]:
        """Append `entries` to the cycle's trace and add `usage` to its LLM usage, in one
        transaction; the stored entries, with their `seq`s."""
        with self._writer.begin() as connection:
            return append_journal(connection, cycle_id, entries, usage)

    def traces(self, cycle_id: int) -> list[TraceEntry]:
        """The trace of cycle `cycle_id`, in order."""
        with self._read() as session:
            return cycle_traces(session, cycle_id)

    def cycle_usage(self, cycle_id: int) -> CycleUsage:
        """The LLM usage recorded on cycle `cycle_id` (zeros when none)."""
        with self._read() as session:
            row = session.get(CycleRow, cycle_id)
            if row is None:
                raise ValueError(f"no cycle {cycle_id}")
            return usage_of(row)

    # -- masking keys (store/masking_keys.py) -----------------------------------------------

    def masking_key(self, account_id: int) -> MaskingKey | None:
        """The stored masking key of `account_id`, or None when it has never been masked."""
        return read_masking_key(self._engine, account_id)

    def save_masking_key(self, key: MaskingKey) -> MaskingKey:
        """Store what of `key` is missing (an existing key and its aliases never change); the
        stored key."""
        return save_masking_key(self._writer, key)

    # -- NAV -------------------------------------------------------------------------------

    def find_nav_snapshot(
        self, account_id: int, at: datetime, kind: SnapshotKind
    ) -> NavSnapshot | None:
        """The snapshot of (account, `at`, `kind`) if one was written, else None."""
        check_utc("at", at)
        with self._engine.connect() as connection:
            return stored_snapshot(connection, account_id, at, SnapshotKind(kind))

    def write_nav_snapshot(
        self, account_id: int, at: datetime, kind: SnapshotKind, marks: Mapping[str, Decimal]
    ) -> NavSnapshot:
        """Write the account's NAV at `at`: cash plus every holding valued at its mark.

        `marks` must price every symbol held (others are ignored). Idempotent: a snapshot already
        written for (account, at, kind), the unique key of `nav_snapshot`, is returned unchanged
        (and `marks` are not looked at), so a resumed cycle never writes a second one.
        """
        check_utc("at", at)
        kind = SnapshotKind(kind)
        try:
            with self._writer.begin() as connection:
                cash = locked_cash(connection, account_id)
                stored = stored_snapshot(connection, account_id, at, kind)
                if stored is not None:
                    return stored
                return insert_snapshot(connection, account_id, cash, at, kind, marks)
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_snapshot(connection, account_id, at, kind)
            if stored is None:
                raise
            return stored


_ACCOUNT: Final = select(
    ACCOUNT_TABLE.c.market, ACCOUNT_TABLE.c.cash, ACCOUNT_TABLE.c.currency
).where(ACCOUNT_TABLE.c.id == bindparam("account"))
_TRADED: Final = (
    select(FILL_TABLE.c.symbol)
    .where(FILL_TABLE.c.account_id.in_(bindparam("accounts", expanding=True)))
    .distinct()
)
_FIRST_FILL: Final = select(func.min(FILL_TABLE.c.filled_at)).where(
    FILL_TABLE.c.account_id.in_(bindparam("accounts", expanding=True))
)
_RECENT_BUYS: Final = (
    select(FILL_TABLE.c.symbol, FILL_TABLE.c.quantity, FILL_TABLE.c.filled_at)
    .where(
        FILL_TABLE.c.account_id == bindparam("account"),
        FILL_TABLE.c.side == Side.BUY.value,
        FILL_TABLE.c.filled_at >= bindparam("since"),
    )
    .order_by(FILL_TABLE.c.id)
)
