"""The ledger a replay writes through: accounts worked in memory, rows written in batches.

`ReplayLedger` is a `Ledger` for a replay that owns its accounts (the SQLite file's lock, or a
Postgres advisory lock per account: `daemon/locks.py`). Nobody else writes those accounts while it
runs, so the claims, leases and per-order transactions that let live daemons share a ledger are
not needed inside a replay: a cycle is claimed, run and finished in memory, and its row is written
once, with its final status, in the next batch. What the cycles of a replay read and write goes
through two parts:

- a working copy of each account (`working_copy.AccountBook`), loaded once: `account_state`,
  `record_order` and `write_nav_snapshot` read and move it, so the broker and the toolbox see cash
  and positions without a query;
- a unit of work (`replay_batch.ReplayBatch`): the rows of the cycles, orders, fills, NAV snapshots
  with their marks and trace entries made since the last `flush`, which writes them in one
  transaction with the moved accounts' cash and positions. The replay driver flushes between
  events (every so many slots, or so much wall time) and at the end, then `check`s every book
  against the ledger as `openbell ledger verify` recomputes it. Or it `seal`s the batch between
  two events and has it written in a worker thread (`write_behind`) while the next slot's agents
  wait on their models, or, where the next slot does not wait, by a forked child process while
  the next slots run (`flush_forked`, on a SQLite file on Linux: `forked_write.py`): every read
  or write of the database waits for a sealed batch first (`settle`), so the ledger's answers are
  the same, and batches are written one at a time, in order.

Every answer is the one the `Ledger` would give at that moment: reads of a cycle, an order, a
snapshot or a trace still in the batch are answered from it, and the rest from the ledger. What
the working copy does not cover (corporate actions, a cycle a killed unbatched run left `claimed`)
flushes the batch first and goes to the ledger, then reloads the book it changed. The ledger
always ends at a flush, on an event boundary: a replay killed at any moment and resumed with
`--resume` starts from the last committed batch and leaves the ledger an uninterrupted run leaves.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Connection, Engine, select
from sqlalchemy.engine.base import OptionEngine

from openbell.markets.corporate_actions import CorporateAction
from openbell.markets.domain import AccountState, Fill, Order, Rejection, Side, check_utc
from openbell.markets.errors import LedgerBreach
from openbell.store.core_tables import CYCLE_TABLE, FILL_TABLE, NAV_SNAPSHOT_TABLE, ORDER_TABLE
from openbell.store.forked_write import ForkedWrite
from openbell.store.hedge_pairs import HedgePick
from openbell.store.ledger import Ledger
from openbell.store.margin_ledger import BorrowFee, ShortDay, last_ended_day
from openbell.store.orders import check_outcome, idempotency_key, stored_order
from openbell.store.records import (
    USAGE_COLUMNS,
    AppliedAction,
    CycleRecord,
    CycleStatus,
    CycleUsage,
    JournalAppend,
    NavSnapshot,
    RecordedOrder,
    SnapshotKind,
    TraceEntry,
)
from openbell.store.replay_batch import IdBlocks, ReplayBatch, WriteBehind
from openbell.store.strategy_runs import StrategyCode, StrategyRun
from openbell.store.working_copy import AccountBook, load_books

_CLAIMED: Final = CycleStatus.CLAIMED.value
#: The columns of a claimed cycle's row that its end sets (its usage: only an LLM agent's).
_UNFINISHED: Final = dict.fromkeys(
    ("finished_at", "error_class", "error_message", "reason", *USAGE_COLUMNS)
)


@dataclass(slots=True)
class _Cycle:
    """A cycle in the batch: its row (written at the flush) and what was recorded in it."""

    row: dict[str, Any]
    orders: list[RecordedOrder] = field(default_factory=list)
    traces: list[TraceEntry] = field(default_factory=list)
    usage: CycleUsage | None = None


class ReplayLedger(Ledger):
    """A `Ledger` whose writes to the accounts it `own`s, from `start_at` on, go through a working
    copy and a unit of work; see the module docstring. Only for a replay holding those accounts."""

    def __init__(self, engine: Engine, *, start_at: datetime) -> None:
        self._behind = WriteBehind()  # before `super().__init__`, which sets `_engine`
        self._forked = ForkedWrite.of(engine)
        self._sealed: ReplayBatch | None = None
        super().__init__(engine)
        check_utc("start_at", start_at)
        self._start_at = start_at
        self._postgres = engine.dialect.name == "postgresql"
        self._ids = IdBlocks(postgres=self._postgres)
        self._batch = ReplayBatch()
        self._books: dict[int, AccountBook] = {}
        self._stored_cycles: set[tuple[int, datetime]] = set()
        self._stored_snapshots: set[tuple[int, datetime, SnapshotKind]] = set()
        self._cycles: dict[int, _Cycle] = {}
        self._cycle_keys: dict[tuple[int, datetime], int] = {}
        self._snapshots: dict[tuple[int, datetime, SnapshotKind], NavSnapshot] = {}
        self._orders_by_cycle: dict[int, list[RecordedOrder]] = {}
        self._orders_by_account: dict[int, list[RecordedOrder]] = {}
        self._order_keys: dict[str, RecordedOrder] = {}
        # Accounts that ever shorted (only they can owe borrow fees), and the last day each was
        # found to owe nothing more (so a day's fees are looked up once, not at every snapshot).
        self._shorters: set[int] = set()
        self._fees_settled: dict[int, date] = {}

    def own(self, account_ids: Collection[int]) -> None:
        """Work `account_ids` in memory from now on: load their books, and which of their cycles
        and snapshots from `start_at` on the ledger already holds (a resumed replay). Until
        then, and for any other account, this is the plain `Ledger`."""
        self.flush()
        ids = sorted(set(account_ids) - set(self._books))
        if not ids:
            return
        with self._engine.connect() as connection:
            self._books.update(load_books(connection, ids, self._start_at))
            self._shorters.update(
                connection.execute(
                    select(FILL_TABLE.c.account_id)
                    .where(FILL_TABLE.c.account_id.in_(ids), FILL_TABLE.c.side == Side.SHORT.value)
                    .distinct()
                ).scalars()
            )
            self._stored_cycles.update(
                (row.account_id, row.slot_at)
                for row in connection.execute(
                    select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at).where(
                        CYCLE_TABLE.c.account_id.in_(ids), CYCLE_TABLE.c.slot_at >= self._start_at
                    )
                )
            )
            self._stored_snapshots.update(
                (row.account_id, row.at, SnapshotKind(row.kind))
                for row in connection.execute(
                    select(
                        NAV_SNAPSHOT_TABLE.c.account_id,
                        NAV_SNAPSHOT_TABLE.c.at,
                        NAV_SNAPSHOT_TABLE.c.kind,
                    ).where(
                        NAV_SNAPSHOT_TABLE.c.account_id.in_(ids),
                        NAV_SNAPSHOT_TABLE.c.at >= self._start_at,
                    )
                )
            )

    # -- the database, once a sealed batch is in it -------------------------------------------

    @property
    def _engine(self) -> Engine:
        """The ledger's engine, for every read and write-through of the `Ledger` this extends:
        a sealed batch is in the ledger first (`settle`), so no read misses its rows and no
        write comes before them."""
        self.settle()
        return self._db

    @_engine.setter
    def _engine(self, engine: Engine) -> None:
        self._db = engine

    @property
    def _writer(self) -> OptionEngine:
        """The ledger's writing engine (`BEGIN IMMEDIATE` on SQLite), after a sealed batch, as
        `_engine`."""
        self.settle()
        return self._db_writer

    @_writer.setter
    def _writer(self, writer: OptionEngine) -> None:
        self._db_writer = writer

    # -- the unit of work ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """How many cycles, orders, snapshots and trace entries wait for the next flush."""
        return len(self._batch)

    def flush(self) -> None:
        """Write the batch in one transaction (after a sealed one: `settle`); afterwards the
        ledger holds every event so far."""
        self.seal()
        self.settle()
        self._ids.reset()

    def seal(self) -> None:
        """End the batch here: what the cycles do from now on goes into the next one. The sealed
        batch is written in one transaction by the first of `write_behind` (in a worker thread,
        while the caller goes on), the next `flush` or `seal`, and any read or write the working
        copy does not answer (these write it at once): meanwhile the cycles read and move the
        working copy, and whatever would read the sealed rows waits for them to be in the
        ledger. A replay seals a batch before a slot whose agents wait on their models, and
        writes it while they do."""
        self.settle()
        if len(self._batch):
            self._sealed, self._batch = self._batch, ReplayBatch()
            self._sealed.seal(self._books)
        self._stored_cycles.update(self._cycle_keys)
        self._stored_snapshots.update(self._snapshots)
        for rows in (self._cycle_keys, self._snapshots, self._orders_by_cycle):
            rows.clear()
        self._cycles.clear()
        self._orders_by_account.clear()
        self._order_keys.clear()

    def write_behind(self) -> None:
        """Start writing the sealed batch (if one waits) in a worker thread, on a connection of
        its own, and return at once; `settle` waits for it."""
        batch, self._sealed = self._sealed, None
        if batch is not None:
            self._behind.start(functools.partial(self._write_batch, batch))

    def flush_forked(self) -> None:
        """`flush`, the batch written by a forked child process while the caller goes on
        (`ForkedWrite`), where the ledger is a SQLite file on Linux: every read or write of the
        database waits for it first (`settle`), so the ledger's answers are the same. Elsewhere,
        or when the process cannot fork safely, the batch is written at once, as by `flush`."""
        self.seal()
        batch, self._sealed = self._sealed, None
        if batch is None:
            return
        if self._forked is None or not self._forked.start(
            functools.partial(self._write_batch, batch)
        ):
            self._write_batch(batch)

    def settle(self) -> None:
        """Have the sealed batch in the ledger: write it now if it waits, wait for it if it is
        being written behind or by a forked child (raising its error)."""
        if self._forked is not None:
            self._forked.wait()
        self._behind.wait()
        batch, self._sealed = self._sealed, None
        if batch is not None:
            self._write_batch(batch)

    def close(self) -> None:
        """`settle` for a replay that ends with an error of its own before its last flush: that
        error is the one raised (if the sealed batch cannot be written either, the ledger ends at
        the batch before it, which `--resume` starts from)."""
        with contextlib.suppress(Exception):
            self.settle()

    def _write_batch(self, batch: ReplayBatch) -> None:
        with self._db_writer.begin() as connection:
            batch.write(connection)

    def check(self) -> None:
        """Flush, then compare each book with the ledger: its stored cash and positions, and
        both as `openbell ledger verify` recomputes them (initial cash and the fills and
        corporate actions in order). `LedgerBreach` naming the first difference."""
        self.flush()
        with self._engine.connect() as connection:
            for account_id, book in sorted(self._books.items()):
                stored = super().account_state(account_id, self._start_at)
                difference = book.difference(connection, stored)
                if difference is not None:
                    raise LedgerBreach(f"account {account_id}: {difference}")

    def _book(self, account_id: int) -> AccountBook | None:
        return self._books.get(account_id)

    def _reload(self, account_id: int, at: datetime) -> None:
        with self._engine.connect() as connection:
            self._books.update(load_books(connection, [account_id], at))

    def _take_id(self, table: Any) -> int:
        return self._ids.take(self._connect_for_ids, table)

    def _connect_for_ids(self) -> Connection:
        # SQLite reads the largest ids (after the batch written behind, whose rows hold some);
        # Postgres reserves ids from the sequences, which no batch's rows change.
        return self._db.connect() if self._postgres else self._engine.connect()

    # -- accounts ------------------------------------------------------------------------------

    def account_state(self, account_id: int, now: datetime) -> AccountState:
        book = self._book(account_id)
        if book is None:
            return super().account_state(account_id, now)
        check_utc("now", now)
        return book.state(now)

    def open_positions(self, account_id: int) -> dict[str, Decimal]:
        book = self._book(account_id)
        if book is None:
            return super().open_positions(account_id)
        return book.open_positions()

    def symbols_traded(
        self, account_ids: Collection[int]
    ) -> tuple[frozenset[str], datetime | None]:
        books = [self._books.get(account_id) for account_id in account_ids]
        if any(book is None for book in books):
            self.flush()
            return super().symbols_traded(account_ids)
        known = [book for book in books if book is not None]
        firsts = [book.first_fill_at for book in known if book.first_fill_at is not None]
        return frozenset(s for book in known for s in book.traded), min(firsts, default=None)

    def apply_corporate_action(
        self,
        account_id: int,
        action: CorporateAction,
        *,
        at: datetime,
        price: Decimal | None = None,
        step: Decimal = Decimal(1),
    ) -> AppliedAction | None:
        self.flush()
        applied = super().apply_corporate_action(account_id, action, at=at, price=price, step=step)
        if applied is not None and applied.created and account_id in self._books:
            self._reload(account_id, at)
        return applied

    # -- cycles --------------------------------------------------------------------------------

    def claim_cycle(
        self,
        account_id: int,
        slot_at: datetime,
        claimed_by: str,
        lease_until: datetime,
        now: datetime,
    ) -> int | None:
        check_utc("slot_at", slot_at)
        check_utc("lease_until", lease_until)
        check_utc("now", now)
        key = (account_id, slot_at)
        if key in self._cycle_keys:
            return None  # this run holds it
        if account_id not in self._books or key in self._stored_cycles:
            self.flush()
            return super().claim_cycle(account_id, slot_at, claimed_by, lease_until, now)
        cycle_id = self._take_id(CYCLE_TABLE)
        row: dict[str, Any] = {
            "id": cycle_id,
            "account_id": account_id,
            "slot_at": slot_at,
            "status": _CLAIMED,
            "claimed_by": claimed_by,
            "lease_until": lease_until,
            "started_at": now,
            **_UNFINISHED,
        }
        self._cycles[cycle_id] = _Cycle(row=row)
        self._batch.cycles[cycle_id] = row
        self._cycle_keys[key] = cycle_id
        return cycle_id

    def find_cycle(self, account_id: int, slot_at: datetime) -> CycleRecord | None:
        check_utc("slot_at", slot_at)
        key = (account_id, slot_at)
        if (cycle_id := self._cycle_keys.get(key)) is not None:
            row = self._cycles[cycle_id].row
            return CycleRecord(
                cycle_id=cycle_id,
                account_id=account_id,
                slot_at=slot_at,
                status=CycleStatus(row["status"]),
                claimed_by=row["claimed_by"],
                lease_until=row["lease_until"],
            )
        if key in self._stored_cycles or account_id not in self._books:
            return super().find_cycle(account_id, slot_at)
        return None

    def last_slot(self, account_id: int, *, before: datetime | None = None) -> datetime | None:
        stored = super().last_slot(account_id, before=before)
        held = [
            slot
            for account, slot in self._cycle_keys
            if account == account_id and (before is None or slot < before)
        ]
        return max([*held, *([stored] if stored is not None else [])], default=None)

    def cycle_account_id(self, cycle_id: int) -> int:
        cycle = self._cycles.get(cycle_id)
        return super().cycle_account_id(cycle_id) if cycle is None else cycle.row["account_id"]

    def take_over_cycle(self, cycle_id: int, claimed_by: str, lease_until: datetime) -> bool:
        cycle = self._cycles.get(cycle_id)
        if cycle is None:
            self.flush()
            return super().take_over_cycle(cycle_id, claimed_by, lease_until)
        check_utc("lease_until", lease_until)
        if cycle.row["status"] != _CLAIMED:
            return False
        cycle.row.update(claimed_by=claimed_by, lease_until=lease_until)
        return True

    def renew_claims(
        self, cycle_ids: Collection[int], held_by: str, lease_until: datetime
    ) -> set[int]:
        check_utc("lease_until", lease_until)
        return self._set_leases(cycle_ids, held_by, lease_until)

    def release_claims(self, cycle_ids: Collection[int], held_by: str, now: datetime) -> set[int]:
        check_utc("now", now)
        return self._set_leases(cycle_ids, held_by, now - timedelta(microseconds=1))

    def _set_leases(
        self, cycle_ids: Collection[int], held_by: str, lease_until: datetime
    ) -> set[int]:
        mine = {cycle_id for cycle_id in cycle_ids if cycle_id in self._cycles}
        found: set[int] = set()
        for cycle_id in mine:
            row = self._cycles[cycle_id].row
            if row["status"] == _CLAIMED and row["claimed_by"] == held_by:
                row["lease_until"] = lease_until
                found.add(cycle_id)
        others = set(cycle_ids) - mine
        if others:
            self.flush()
            found |= super().renew_claims(others, held_by, lease_until)
        return found

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
        cycle = self._cycles.get(cycle_id)
        if cycle is None:
            self.flush()
            return super().finish_cycle(
                cycle_id,
                status,
                now,
                error_class=error_class,
                error_message=error_message,
                reason=reason,
                held_by=held_by,
            )
        check_utc("now", now)
        status = status if type(status) is CycleStatus else CycleStatus(status)
        if status is CycleStatus.CLAIMED:
            raise ValueError("finish_cycle needs a terminal status, not 'claimed'")
        row = cycle.row
        stored, holder = row["status"], row["claimed_by"]
        if held_by is not None and (holder != held_by or stored not in (_CLAIMED, status.value)):
            return False
        if stored == status.value:
            return True
        if stored != _CLAIMED:
            raise ValueError(f"cycle {cycle_id} is already {stored}, not {status.value}")
        row.update(
            status=status.value,
            finished_at=now,
            error_class=error_class,
            error_message=error_message,
            reason=reason,
        )
        return True

    # -- orders --------------------------------------------------------------------------------

    def record_order(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        outcome: Fill | Rejection,
        target_weight: Decimal | None = None,
    ) -> RecordedOrder:
        key = idempotency_key(cycle_id, seq)
        if (found := self._order_keys.get(key)) is not None:
            return found
        account_id = self.cycle_account_id(cycle_id)
        book = self._book(account_id)
        if book is None:
            self.flush()
            return super().record_order(
                cycle_id=cycle_id,
                seq=seq,
                order=order,
                outcome=outcome,
                target_weight=target_weight,
            )
        if cycle_id not in self._cycles:  # a cycle a killed run left claimed, taken over
            with self._engine.connect() as connection:
                stored = stored_order(connection, key)
            if stored is not None:
                return stored
        check_outcome(account_id, book.market, book.currency, order, outcome)
        order_id = self._take_id(ORDER_TABLE)
        fill_id: int | None = None
        if isinstance(outcome, Fill):
            fill_id = self._take_id(FILL_TABLE)
            try:
                book.apply(outcome, fill_id, key)
            except LedgerBreach:  # nothing was written: the ids are free again
                self._ids.give_back(FILL_TABLE, fill_id)
                self._ids.give_back(ORDER_TABLE, order_id)
                raise
        self._batch.add_order(
            order_id=order_id,
            cycle_id=cycle_id,
            account_id=account_id,
            seq=seq,
            key=key,
            order=order,
            outcome=outcome,
            target_weight=target_weight,
        )
        if isinstance(outcome, Fill) and outcome.side is Side.SHORT:
            self._shorters.add(account_id)
        if isinstance(outcome, Fill) and fill_id is not None:
            self._batch.add_fill(
                fill_id=fill_id, order_id=order_id, account_id=account_id, key=key, fill=outcome
            )
        recorded = RecordedOrder(
            order_id=order_id,
            idempotency_key=key,
            outcome=outcome,
            created=True,
            fill_id=fill_id,
            seq=seq,
            symbol=order.instrument.symbol,
            side=Side(order.side),
            quantity=order.quantity,
            target_weight=target_weight,
            placed_at=order.placed_at,
        )
        again = replace(recorded, created=False)
        self._order_keys[key] = again
        self._orders_by_cycle.setdefault(cycle_id, []).append(again)
        self._orders_by_account.setdefault(account_id, []).append(again)
        return recorded

    def cycle_orders(self, cycle_id: int) -> list[RecordedOrder]:
        stored = [] if cycle_id in self._cycles else super().cycle_orders(cycle_id)
        return [*stored, *self._orders_by_cycle.get(cycle_id, ())]

    def recent_orders(self, account_id: int, before: datetime, limit: int) -> list[RecordedOrder]:
        stored = super().recent_orders(account_id, before, limit)
        pending = [
            order
            for order in self._orders_by_account.get(account_id, ())
            if order.placed_at is not None and order.placed_at < before
        ]
        if not pending:
            return stored
        merged = sorted(
            [*stored, *pending],
            key=lambda order: (order.placed_at, order.order_id),
            reverse=True,
        )
        return merged[:limit]

    # -- borrow fees and margin calls: rare, written through after the batch ------------------

    def short_days_due(self, account_id: int, until: datetime) -> list[ShortDay]:
        if account_id not in self._books:
            self.flush()
            return super().short_days_due(account_id, until)
        if account_id not in self._shorters:  # never shorted: owes no fee (at every snapshot)
            check_utc("until", until)
            return []
        last_day = last_ended_day(until)
        if self._fees_settled.get(account_id) == last_day:
            return []
        self.flush()
        due = super().short_days_due(account_id, until)
        if not due:
            self._fees_settled[account_id] = last_day
        return due

    def charge_borrow_fees(self, account_id: int, fees: Sequence[BorrowFee]) -> list[BorrowFee]:
        self.flush()
        written = super().charge_borrow_fees(account_id, fees)
        if written and account_id in self._books:
            self._reload(account_id, max(fee.charged_at for fee in written))
        return written

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
        self.flush()
        recorded = super().record_margin_cover(
            cycle_id=cycle_id,
            seq=seq,
            order=order,
            outcome=outcome,
            equity=equity,
            requirement=requirement,
        )
        account_id = self.cycle_account_id(cycle_id)
        if recorded.created and recorded.fill_id is not None and account_id in self._books:
            self._reload(account_id, order.placed_at)
        return recorded

    def latest_nav_snapshot(self, account_id: int, before: datetime) -> NavSnapshot | None:
        check_utc("before", before)
        pending = [
            snapshot
            for (account, at, _kind), snapshot in self._snapshots.items()
            if account == account_id and at <= before
        ]
        if pending:  # the batch holds the newest ones
            return max(pending, key=lambda snapshot: (snapshot.at, snapshot.snapshot_id))
        return super().latest_nav_snapshot(account_id, before)

    # -- strategy-code and hedging agents: written through, after the batch (their rows refer to
    # its cycles) --

    def save_strategy(self, strategy: StrategyCode) -> StrategyCode:
        self.flush()
        return super().save_strategy(strategy)

    def record_strategy_run(self, run: StrategyRun) -> StrategyRun:
        self.flush()
        return super().record_strategy_run(run)

    def save_hedge_pair(self, pick: HedgePick) -> HedgePick:
        self.flush()
        return super().save_hedge_pair(pick)

    # -- traces and LLM usage ------------------------------------------------------------------

    def append_journal(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None = None
    ) -> tuple[TraceEntry, ...]:
        cycle = self._cycles.get(cycle_id)
        if cycle is None:
            self.flush()
            return super().append_journal(cycle_id, entries, usage)
        if any(entry.cycle_id != cycle_id for entry in entries):
            raise ValueError(f"every entry must belong to cycle {cycle_id}")
        if usage is not None:
            cycle.usage = (cycle.usage or CycleUsage()) + usage
            cycle.row.update({name: getattr(cycle.usage, name) for name in USAGE_COLUMNS})
        first = len(cycle.traces) + 1
        stored = tuple(replace(entry, seq=first + index) for index, entry in enumerate(entries))
        cycle.traces.extend(stored)
        self._batch.add_traces(stored)
        return stored

    def journal_buffered(self, cycle_id: int) -> bool:
        """Whether `append_journal` of `cycle_id` only adds to the batch (its cycle is in it): no
        transaction, so the LLM agents' journal batch appends it at once (`agents/llm/batching`)."""
        return cycle_id in self._cycles

    def append_journals(self, appends: Sequence[JournalAppend]) -> tuple[TraceEntry, ...]:
        # The LLM agents' batch of a loop turn: each cycle's part goes where its cycle is (the
        # batch, or the ledger once written), in order.
        stored: list[TraceEntry] = []
        for append in appends:
            stored.extend(self.append_journal(append.cycle_id, append.entries, append.usage))
        return tuple(stored)

    def traces(self, cycle_id: int) -> list[TraceEntry]:
        cycle = self._cycles.get(cycle_id)
        return super().traces(cycle_id) if cycle is None else list(cycle.traces)

    def cycle_usage(self, cycle_id: int) -> CycleUsage:
        cycle = self._cycles.get(cycle_id)
        if cycle is None:
            return super().cycle_usage(cycle_id)
        return cycle.usage or CycleUsage()

    # -- NAV -----------------------------------------------------------------------------------

    def find_nav_snapshot(
        self, account_id: int, at: datetime, kind: SnapshotKind
    ) -> NavSnapshot | None:
        check_utc("at", at)
        key = (account_id, at, _snapshot_kind(kind))
        if (found := self._snapshots.get(key)) is not None:
            return found
        if key in self._stored_snapshots or account_id not in self._books or at < self._start_at:
            return super().find_nav_snapshot(account_id, at, kind)
        return None

    def write_nav_snapshot(
        self,
        account_id: int,
        at: datetime,
        kind: SnapshotKind,
        marks: Mapping[str, Decimal],
        *,
        cycle_id: int | None = None,
    ) -> NavSnapshot:
        check_utc("at", at)
        kind = _snapshot_kind(kind)
        key = (account_id, at, kind)
        if (found := self._snapshots.get(key)) is not None:
            return found
        book = self._books.get(account_id)
        if book is None or at < self._start_at:
            found = super().find_nav_snapshot(account_id, at, kind)
            if found is not None:
                return found
            self.flush()
            return super().write_nav_snapshot(account_id, at, kind, marks, cycle_id=cycle_id)
        if key in self._stored_snapshots:  # a resumed replay's, already in the ledger
            found = super().find_nav_snapshot(account_id, at, kind)
            if found is not None:
                return found
        valued = book.value(marks, at)
        positions_value = Decimal(0)
        for mark in valued.values():
            positions_value += mark.value
        snapshot = NavSnapshot(
            snapshot_id=self._take_id(NAV_SNAPSHOT_TABLE),
            account_id=account_id,
            at=at,
            kind=kind,
            cash=book.cash,
            positions_value=positions_value,
            nav=book.cash + positions_value,
            last_fill_id=book.last_fill_id,
            last_action_id=book.last_action_id,
            marks=valued,
        )
        self._snapshots[key] = snapshot
        self._batch.add_snapshot(snapshot)
        return snapshot


def _snapshot_kind(kind: SnapshotKind | str) -> SnapshotKind:
    """`SnapshotKind(kind)`, without the enum's lookup for a member (what the runner passes, two
    reads and a write per account and slot)."""
    return kind if type(kind) is SnapshotKind else SnapshotKind(kind)
