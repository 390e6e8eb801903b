"""A replay's unit of work: the rows of many slots, written to the ledger in one transaction.

Internal to `openbell.store`, for `ReplayLedger` (`replay_ledger.py`). `ReplayBatch` holds the rows
a replay has made since its last flush (cycles, orders, fills, NAV snapshots with their marks,
trace entries) and the accounts whose cash and positions moved, and `flush` writes them all in one
transaction: each table with one `executemany` of a prebuilt Core insert, in foreign-key order,
then each moved account's cash and positions from its working copy (`working_copy.py`). The batch
either commits whole or not at all, so the ledger always ends at an event boundary of the replay:
its resume point is the ledger itself (the cycles and snapshots it holds), and a replay killed at
any moment resumes from the last committed batch. A batch `seal`ed with its accounts' cash and
positions as they are can be written later, by `WriteBehind` in a worker thread or by a forked
child (`forked_write.py`), while the books move on.

Rows get their ids here, since later rows refer to them (`IdBlocks`): on SQLite the replay owns the
file (its lock), so ids continue from each table's largest; on Postgres, where other replays of
other accounts may write at the same time, ids are reserved from the tables' sequences in blocks.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    Connection,
    Dialect,
    Integer,
    Table,
    bindparam,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.sql.compiler import SQLCompiler

from openbell.markets.domain import Fill, Order, Rejection
from openbell.store.chain import link_rows, seal_cycles
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    CYCLE_DIGEST_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    POSITION_TABLE,
    TRACE_TABLE,
)
from openbell.store.db import TEXT_PARAMETERS, masked_statements
from openbell.store.digests import cycle_records
from openbell.store.records import NavSnapshot, OrderStatus, TraceEntry
from openbell.store.traces import trace_values
from openbell.store.types import ExactDecimal, UtcDateTime
from openbell.store.working_copy import AccountBook

#: How many ids of a table are reserved from its Postgres sequence at a time.
ID_BLOCK: Final = 1024
#: The tables whose ids a batch assigns itself.
ID_TABLES: Final = (CYCLE_TABLE, ORDER_TABLE, FILL_TABLE, NAV_SNAPSHOT_TABLE)


class IdBlocks:
    """Hands out the ids of new rows of `ID_TABLES`, in increasing order per table."""

    def __init__(self, postgres: bool) -> None:
        self._postgres = postgres
        self._free: dict[str, list[int]] = {table.name: [] for table in ID_TABLES}
        self._next: dict[str, int] = {}

    def take(self, connect: Callable[[], Connection], table: Table) -> int:
        """The next id of a new row of `table` (`connect` opens a connection, when one is
        needed to find or reserve more)."""
        if not self._postgres:
            # SQLite: the replay is the file's only writer, so the ids after the largest are free.
            found = self._next.get(table.name)
            if found is None:
                with connect() as connection:
                    largest = connection.execute(select(func.max(table.c.id))).scalar_one()
                found = (largest or 0) + 1
            self._next[table.name] = found + 1
            return found
        free = self._free[table.name]
        if not free:
            with connect() as connection:
                free.extend(sorted(_reserve(connection, table), reverse=True))
        return free.pop()

    def give_back(self, table: Table, taken: int) -> None:
        """Hand out `taken`, the id of `table` taken last, again (its row was never made)."""
        if not self._postgres:
            if self._next.get(table.name) == taken + 1:
                self._next[table.name] = taken
            return
        self._free[table.name].append(taken)

    def reset(self) -> None:
        """SQLite: read the largest ids again at the next `take` (after a flush, or once the
        ledger wrote rows of its own); Postgres keeps its reserved ids."""
        self._next.clear()


def _reserve(connection: Connection, table: Table) -> list[int]:
    """`ID_BLOCK` ids taken from the Postgres sequence of `table`'s id."""
    sequence = func.pg_get_serial_sequence(
        connection.dialect.identifier_preparer.quote(table.name), "id"
    )
    query = select(func.nextval(sequence)).select_from(func.generate_series(1, ID_BLOCK).alias())
    reserved = [int(value) for value in connection.execute(query).scalars()]
    connection.commit()
    return reserved


class WriteBehind:
    """Writes one batch at a time in a worker thread while the caller goes on: `start` a write,
    `wait` until it has ended (raising its error, once)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, write: Callable[[], None]) -> None:
        """Run `write` in a new worker thread, once the one before has ended (its error raised)."""
        self.wait()
        self._thread = threading.Thread(
            target=self._run, args=(write,), name="openbell-replay-batch"
        )
        self._thread.start()

    def _run(self, write: Callable[[], None]) -> None:
        try:
            write()
        except BaseException as exc:  # noqa: BLE001  (raised by `wait`, in the caller's thread)
            self._error = exc

    def wait(self) -> None:
        """Block until the write started last has ended; raise its error if it failed."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error


class ReplayBatch:
    """The rows made since the last flush, and the accounts they moved."""

    def __init__(self) -> None:
        self.cycles: dict[int, dict[str, Any]] = {}
        self.orders: list[dict[str, Any]] = []
        self.fills: list[dict[str, Any]] = []
        self.snapshots: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self.traces: list[dict[str, Any]] = []
        self.moved: set[int] = set()
        #: The moved accounts' cash and positions, once sealed (`seal`).
        self.accounts: BookRows | None = None

    def __len__(self) -> int:
        return len(self.cycles) + len(self.orders) + len(self.snapshots) + len(self.traces)

    def add_order(
        self,
        *,
        order_id: int,
        cycle_id: int,
        account_id: int,
        seq: int,
        key: str,
        order: Order,
        outcome: Fill | Rejection,
        target_weight: Decimal | None,
    ) -> None:
        """The `order` row of order `seq` of a cycle, with its outcome (as `orders.insert_order`
        writes it)."""
        rejection = outcome if isinstance(outcome, Rejection) else None
        self.orders.append(
            {
                "id": order_id,
                "cycle_id": cycle_id,
                "account_id": account_id,
                "seq": seq,
                "idempotency_key": key,
                "symbol": order.instrument.symbol,
                "side": order.side.value,
                "quantity": order.quantity,
                "target_weight": target_weight,
                "reason": order.reason,
                "confidence": order.confidence,
                "placed_at": order.placed_at,
                "status": (OrderStatus.FILLED if rejection is None else OrderStatus.REJECTED).value,
                "reject_reason": None if rejection is None else rejection.reason.value,
                "reject_message": None if rejection is None else rejection.message,
                "rejected_at": None if rejection is None else rejection.at,
            }
        )

    def add_fill(
        self, *, fill_id: int, order_id: int, account_id: int, key: str, fill: Fill
    ) -> None:
        """The `fill` row of an order, and its account among those moved."""
        self.moved.add(account_id)
        self.fills.append(
            {
                "id": fill_id,
                "order_id": order_id,
                "account_id": account_id,
                "idempotency_key": key,
                "symbol": fill.symbol,
                "side": fill.side.value,
                "quantity": fill.quantity,
                "price": fill.price,
                "notional": fill.notional,
                "fees": fill.fees,
                "currency": fill.currency,
                "filled_at": fill.filled_at,
                "price_source": fill.price_source,
            }
        )

    def add_snapshot(self, snapshot: NavSnapshot) -> None:
        """The `nav_snapshot` row of `snapshot` and its `nav_mark` rows."""
        self.snapshots.append(
            {
                "id": snapshot.snapshot_id,
                "account_id": snapshot.account_id,
                "at": snapshot.at,
                "kind": snapshot.kind.value,
                "cash": snapshot.cash,
                "positions_value": snapshot.positions_value,
                "nav": snapshot.nav,
                "last_fill_id": snapshot.last_fill_id,
                "last_action_id": snapshot.last_action_id,
            }
        )
        self.marks.extend(
            {
                "snapshot_id": snapshot.snapshot_id,
                "symbol": mark.symbol,
                "quantity": mark.quantity,
                "price": mark.price,
                "value": mark.value,
            }
            for mark in snapshot.marks.values()
        )

    def add_traces(self, entries: Iterable[TraceEntry]) -> None:
        """The `trace` rows of `entries` (numbered)."""
        self.traces.extend(trace_values(entry) for entry in entries)

    def seal(self, books: Mapping[int, AccountBook]) -> None:
        """Take the moved accounts' cash and positions from their `books` as they are now, to be
        written with the rows: the batch can then be written while the books move on (a write
        behind, `WriteBehind`)."""
        self.accounts = BookRows.of(books[account_id] for account_id in sorted(self.moved))

    def write(self, connection: Connection) -> None:
        """Insert every row and write the moved accounts' cash and positions as they were sealed,
        then chain the finished cycles' records (`chain.seal_cycles`), on `connection` (inside the
        caller's transaction)."""
        if self.moved and self.accounts is None:
            raise RuntimeError("a batch that moved accounts is written once sealed")
        instants: dict[Any, Any] = {}  # a batch's instants repeat: each is bound once
        masked = masked_statements(connection)
        for table, rows in (
            (CYCLE_TABLE, list(self.cycles.values())),
            (ORDER_TABLE, self.orders),
            (FILL_TABLE, self.fills),
            (NAV_SNAPSHOT_TABLE, self.snapshots),
            (NAV_MARK_TABLE, self.marks),
            (TRACE_TABLE, self.traces),
        ):
            if rows:
                insert_rows(connection, table, rows, instants=instants)
        if self.accounts is not None:
            self.accounts.write(connection)
        finished = [row for row in self.cycles.values() if row["status"] != "claimed"]
        finished.sort(key=lambda row: (row["slot_at"], row["id"]))
        if masked_statements(connection) != masked:  # stored otherwise than held: read back
            seal_cycles(connection, [row["id"] for row in finished])
            return
        records = cycle_records(
            cycles=finished,
            orders=self.orders,
            fills=self.fills,
            traces=self.traces,
            snapshots=self.snapshots,
            marks=self.marks,
        )
        links = link_rows(connection, [records[row["id"]] for row in finished])
        if links:
            insert_rows(connection, CYCLE_DIGEST_TABLE, links, instants=instants)


def insert_rows(
    connection: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    instants: dict[Any, Any] | None = None,
) -> None:
    """Insert `rows` (each with the same columns) into `table` through the driver: the statement
    compiled once, each column's values through its type's bind processor (what Core's insert does
    row by row, at a cost per row). SQLite runs it with one `executemany`; Postgres, where each
    row of an `executemany` is a message of its own, as one `INSERT ... SELECT * FROM unnest(...)`
    of an array per column. The engine's hooks (the masking of `db.py`) still see every
    parameter. A statement that would need more than the rows' values (a column default) goes
    through Core's insert. `instants` keeps what the `UtcDateTime` columns' processor gave for
    each instant, to give it again (a pure function of the instant: an equal datetime is the same
    instant), across the tables of one batch."""
    dialect = connection.dialect
    names = list(rows[0])
    compiled = _compiled_insert(table, dialect, tuple(names))
    if set(compiled.binds) != set(names) or compiled.escaped_bind_names:
        connection.execute(table.insert(), rows)
        return
    head, _, group = compiled.string.partition(" VALUES ")
    order = list(compiled.positiontup or ()) if dialect.positional else _NAMED.findall(group)
    if sorted(order) != sorted(names):
        connection.execute(table.insert(), rows)
        return
    processors = [
        _kept(process, instants)
        if instants is not None
        and process is not None
        and isinstance(table.c[name].type, UtcDateTime)
        else process
        for name, process in (
            (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in order
        )
    ]
    values = [
        [row[name] for row in rows] if process is None else [process(row[name]) for row in rows]
        for name, process in zip(order, processors, strict=True)
    ]
    unnest = dialect.name == "postgresql"  # a tuple of one array per column, by position
    texts = {TEXT_PARAMETERS: _text_parameters(table, order, dialect.positional or unnest)}
    if unnest:
        types = dialect.type_compiler_instance
        arrays = ", ".join(
            f"%s::{types.process(table.c[name].type.dialect_impl(dialect))}[]" for name in order
        )
        columns = ", ".join(dialect.identifier_preparer.quote(name) for name in order)
        statement = f"{head.partition(' (')[0]} ({columns}) SELECT * FROM unnest({arrays})"  # noqa: S608  (quoted names; values bound)
        connection.exec_driver_sql(statement, tuple(values), execution_options=texts)
        return
    parameters: list[Any] = (
        list(zip(*values, strict=True))
        if dialect.positional
        else [dict(zip(order, row, strict=True)) for row in zip(*values, strict=True)]
    )
    connection.exec_driver_sql(compiled.string, parameters, execution_options=texts)


def _text_parameters(table: Table, order: Sequence[str], positional: bool) -> tuple[Any, ...]:
    """The parameters of `table`'s insert of the columns `order` that may hold text (by position
    when `positional`, else by name): all but those of typed columns, which bind numbers and
    instants (`db.TEXT_PARAMETERS`)."""
    return tuple(
        index if positional else name
        for index, name in enumerate(order)
        if not isinstance(table.c[name].type, _TYPED)
    )


#: Column types whose bound values hold no text to mask: exact decimals, instants, integers and
#: booleans (what SQLite gets as text is the number or the instant written out).
_TYPED: Final = (ExactDecimal, UtcDateTime, Integer, Boolean)


@functools.lru_cache(maxsize=64)
def _compiled_insert(table: Table, dialect: Dialect, names: tuple[str, ...]) -> SQLCompiler:
    """`table`'s insert of `names` compiled for `dialect`, once (every batch inserts the same
    columns of the same tables)."""
    return table.insert().compile(dialect=dialect, column_keys=list(names))


def _kept(process: Callable[[Any], Any], kept: dict[Any, Any]) -> Callable[[Any], Any]:
    """`process`, giving again what it gave for a value equal to one it had (`kept`)."""

    def processed(value: Any) -> Any:
        try:
            return kept[value]
        except KeyError:
            found = kept[value] = process(value)
            return found
        except TypeError:  # not hashable: not an instant, which `process` says
            return process(value)

    return processed


#: A named parameter of a compiled Postgres (psycopg, `pyformat`) statement.
_NAMED: Final = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True, slots=True)
class BookRows:
    """Accounts' cash and positions as their books held them when taken: the rows that set each
    account's cash and replace its positions."""

    cash: tuple[dict[str, Any], ...]
    positions: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, books: Iterable[AccountBook]) -> BookRows:
        """The rows of `books` now (a `Holding` changes in place: its values are copied)."""
        books = list(books)
        return cls(
            cash=tuple({"account": book.account_id, "new_cash": book.cash} for book in books),
            positions=tuple(
                {
                    "account_id": book.account_id,
                    "symbol": symbol,
                    "quantity": holding.quantity,
                    "cost": holding.cost,
                    "updated_at": holding.updated_at,
                }
                for book in books
                for symbol, holding in sorted(book.holdings.items())
            ),
        )

    def write(self, connection: Connection) -> None:
        """Set each account's cash and replace its positions with these."""
        if not self.cash:
            return
        connection.execute(_SET_CASH, list(self.cash))
        connection.execute(
            delete(POSITION_TABLE).where(
                POSITION_TABLE.c.account_id.in_([row["account"] for row in self.cash])
            )
        )
        if self.positions:
            connection.execute(POSITION_TABLE.insert(), list(self.positions))


_SET_CASH: Final = (
    update(ACCOUNT_TABLE)
    .where(ACCOUNT_TABLE.c.id == bindparam("account"))
    .values(cash=bindparam("new_cash"))
)
