"""The rows a verification reads, as light tuples, read in one consistent snapshot of the ledger.

`read_facts` reads every row the checks need (or, given `Watermarks`, only the rows written after
them, plus the few older rows those name) with plain column selects rather than ORM objects (a
third of the old verify's time went into building them), each table once, in one transaction:
SQLite's read transaction, Postgres's `REPEATABLE READ`, so a daemon writing meanwhile cannot
show the checks a fill without its account's cash. The rows come back grouped by account, each
list in id order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.sql.elements import ColumnElement

from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    BORROW_FEE_TABLE,
    CORPORATE_ACTION_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    POSITION_TABLE,
)
from openbell.store.records import OrderStatus


class Account(NamedTuple):
    id: int
    agent_id: int
    market: str
    currency: str
    initial_cash: Decimal
    cash: Decimal
    allow_short: bool


class Fill(NamedTuple):
    id: int
    order_id: int
    account_id: int
    symbol: str
    side: str
    quantity: Decimal
    price: Decimal
    notional: Decimal
    fees: Decimal
    currency: str
    filled_at: datetime


class Action(NamedTuple):
    id: int
    account_id: int
    symbol: str
    kind: str
    ex_date: date
    ex_at: datetime
    ratio: Decimal
    cash_per_share: Decimal
    currency: str
    quantity_before: Decimal
    quantity_delta: Decimal
    fraction: Decimal
    price: Decimal | None
    cash_delta: Decimal
    after_fill_id: int | None


class Fee(NamedTuple):
    id: int
    account_id: int
    symbol: str
    day: date
    quantity: Decimal
    price: Decimal
    rate_bps: Decimal
    day_count: int
    amount: Decimal
    currency: str
    after_fill_id: int | None
    charged_at: datetime


class Snapshot(NamedTuple):
    id: int
    account_id: int
    at: datetime
    kind: str
    cash: Decimal
    positions_value: Decimal
    nav: Decimal
    last_fill_id: int | None
    last_action_id: int | None


class Mark(NamedTuple):
    snapshot_id: int
    symbol: str
    quantity: Decimal
    price: Decimal
    value: Decimal


class Order(NamedTuple):
    id: int
    cycle_id: int
    account_id: int
    symbol: str
    side: str
    quantity: Decimal
    status: str
    reason: str


class MarginCall(NamedTuple):
    id: int
    account_id: int
    cycle_id: int
    order_id: int
    reason: str


class Position(NamedTuple):
    account_id: int
    symbol: str
    quantity: Decimal


#: The tables whose new rows an incremental verification reads (by id above its watermark), by
#: the name a mark stores their watermark and counts under.
FILL, ACTION, FEE, SNAPSHOT, ORDER, MARGIN_CALL = (
    "fill",
    "corporate_action",
    "borrow_fee",
    "nav_snapshot",
    "order",
    "margin_call",
)
ID_COLUMNS: dict[str, Any] = {
    FILL: FILL_TABLE.c.id,
    ACTION: CORPORATE_ACTION_TABLE.c.id,
    FEE: BORROW_FEE_TABLE.c.id,
    SNAPSHOT: NAV_SNAPSHOT_TABLE.c.id,
    ORDER: ORDER_TABLE.c.id,
    MARGIN_CALL: MARGIN_CALL_TABLE.c.id,
}
_ACCOUNT_COLUMNS: dict[str, Any] = {
    FILL: FILL_TABLE.c.account_id,
    ACTION: CORPORATE_ACTION_TABLE.c.account_id,
    FEE: BORROW_FEE_TABLE.c.account_id,
    SNAPSHOT: NAV_SNAPSHOT_TABLE.c.account_id,
    ORDER: ORDER_TABLE.c.account_id,
    MARGIN_CALL: MARGIN_CALL_TABLE.c.account_id,
}

#: The newest id of each table of `ID_COLUMNS` a verification read (0: none).
Watermarks = dict[str, int]


@dataclass(slots=True)
class AccountFacts:
    """One account's rows (those after the watermarks, for an incremental verification)."""

    fills: list[Fill] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    fees: list[Fee] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    margin_calls: list[MarginCall] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Facts:
    """What one verification read: every account and its rows, and the rows they name.

    `older_fills_by_order` are the fills at or below the watermarks of the orders the new rows
    name, `recent_fees` the fees of days after `fees_after` (an incremental verification's
    missing-fee check needs the older fees of the days it checks), `counts` each account's rows
    at or below the watermarks, per table (what a mark promised there were).
    """

    accounts: dict[int, Account]
    agent_names: dict[int, str]
    positions: dict[int, list[Position]]
    by_account: dict[int, AccountFacts]
    marks: dict[int, list[Mark]]
    orders: dict[int, Order]
    cycle_accounts: dict[int, int]
    new_orders: list[Order]
    watermarks: Watermarks
    older_fills_by_order: dict[int, list[Fill]] = field(default_factory=dict)
    recent_fees: list[Fee] = field(default_factory=list)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    new_order_counts: dict[int, int] = field(default_factory=dict)

    def of(self, account_id: int) -> AccountFacts:
        """The rows of `account_id` (empty when it has none)."""
        return self.by_account.get(account_id) or AccountFacts()


_T = TypeVar("_T")


def read_facts(
    engine: Engine, since: Watermarks | None = None, *, fees_after: date | None = None
) -> Facts:
    """Every row the checks need, in one consistent snapshot; with `since`, only the rows above
    those watermarks (with the older rows they name, each account's older counts, and the fees of
    days after `fees_after`)."""
    with _snapshot_connection(engine) as connection:
        return _read(connection, since, fees_after)


def _snapshot_connection(engine: Engine) -> Any:
    if engine.dialect.name == "postgresql":
        return engine.connect().execution_options(isolation_level="REPEATABLE READ")
    return engine.connect()


def _read(connection: Connection, since: Watermarks | None, fees_after: date | None) -> Facts:
    def above(table: str) -> list[ColumnElement[bool]]:
        return [] if since is None else [ID_COLUMNS[table] > since.get(table, 0)]

    with connection.begin():
        accounts = _rows(
            connection,
            Account,
            [
                ACCOUNT_TABLE.c.id,
                ACCOUNT_TABLE.c.agent_id,
                ACCOUNT_TABLE.c.market,
                ACCOUNT_TABLE.c.currency,
                ACCOUNT_TABLE.c.initial_cash,
                ACCOUNT_TABLE.c.cash,
                ACCOUNT_TABLE.c.allow_short,
            ],
            order_by=ACCOUNT_TABLE.c.id,
        )
        agents = connection.execute(select(AGENT_TABLE.c.id, AGENT_TABLE.c.name)).all()
        positions = _rows(
            connection,
            Position,
            [POSITION_TABLE.c.account_id, POSITION_TABLE.c.symbol, POSITION_TABLE.c.quantity],
        )
        fills = _rows(connection, Fill, _FILL_COLUMNS, *above(FILL), order_by=FILL_TABLE.c.id)
        actions = _rows(
            connection,
            Action,
            _ACTION_COLUMNS,
            *above(ACTION),
            order_by=CORPORATE_ACTION_TABLE.c.id,
        )
        fees = _rows(connection, Fee, _FEE_COLUMNS, *above(FEE), order_by=BORROW_FEE_TABLE.c.id)
        snapshots = _rows(
            connection,
            Snapshot,
            _SNAPSHOT_COLUMNS,
            *above(SNAPSHOT),
            order_by=NAV_SNAPSHOT_TABLE.c.id,
        )
        mark_filter = (
            [] if since is None else [NAV_MARK_TABLE.c.snapshot_id > since.get(SNAPSHOT, 0)]
        )
        marks = _rows(
            connection, Mark, _MARK_COLUMNS, *mark_filter, order_by=NAV_MARK_TABLE.c.snapshot_id
        )
        calls = _rows(
            connection,
            MarginCall,
            _CALL_COLUMNS,
            *above(MARGIN_CALL),
            order_by=MARGIN_CALL_TABLE.c.id,
        )
        new_orders = _rows(
            connection, Order, _ORDER_COLUMNS, *above(ORDER), order_by=ORDER_TABLE.c.id
        )
        watermarks = _watermarks(connection)
        facts = Facts(
            accounts={row.id: row for row in accounts},
            agent_names={row.id: row.name for row in agents},
            positions=_grouped(positions, lambda row: row.account_id),
            by_account=_by_account(fills, actions, fees, snapshots, calls),
            marks=_grouped(marks, lambda row: row.snapshot_id),
            orders={row.id: row for row in new_orders},
            cycle_accounts={},
            new_orders=new_orders,
            watermarks=watermarks,
        )
        for order in new_orders:
            facts.new_order_counts[order.account_id] = (
                facts.new_order_counts.get(order.account_id, 0) + 1
            )
        _read_named(connection, facts, since, fills, calls, fees_after)
    return facts


def _read_named(
    connection: Connection,
    facts: Facts,
    since: Watermarks | None,
    fills: Sequence[Fill],
    calls: Sequence[MarginCall],
    fees_after: date | None,
) -> None:
    """The older rows the new ones name: orders, cycles, the older fills of their orders, the
    fees of the days still to check, and each account's older counts (each a range query from
    the smallest id named, so nothing is asked id by id)."""
    named_orders = {fill.order_id for fill in fills} | {call.order_id for call in calls}
    filled = {order.id for order in facts.new_orders if order.status == OrderStatus.FILLED.value}
    missing = {order_id for order_id in named_orders if order_id not in facts.orders}
    if missing:
        older = _rows(
            connection,
            Order,
            _ORDER_COLUMNS,
            ORDER_TABLE.c.id >= min(missing),
            ORDER_TABLE.c.id <= max(missing),
        )
        facts.orders.update({row.id: row for row in older if row.id in missing})
    named_cycles = {order.cycle_id for order in facts.orders.values()}
    named_cycles |= {call.cycle_id for call in calls}
    if named_cycles:
        cycle_filter = [] if since is None else [CYCLE_TABLE.c.id >= min(named_cycles)]
        cycles = connection.execute(
            select(CYCLE_TABLE.c.id, CYCLE_TABLE.c.account_id).where(*cycle_filter)
        )
        facts.cycle_accounts = {
            cycle_id: account_id for cycle_id, account_id in cycles if cycle_id is not None
        }
    if since is None:
        return
    if named_orders | filled:
        older_fills = _rows(
            connection,
            Fill,
            _FILL_COLUMNS,
            FILL_TABLE.c.id <= since.get(FILL, 0),
            FILL_TABLE.c.order_id >= min(named_orders | filled),
            order_by=FILL_TABLE.c.id,
        )
        facts.older_fills_by_order = _grouped(
            [fill for fill in older_fills if fill.order_id in named_orders | filled],
            lambda row: row.order_id,
        )
    if fees_after is not None:
        facts.recent_fees = _rows(
            connection,
            Fee,
            _FEE_COLUMNS,
            BORROW_FEE_TABLE.c.day > fees_after,
            order_by=BORROW_FEE_TABLE.c.id,
        )
    for table, account_column in _ACCOUNT_COLUMNS.items():
        counted = connection.execute(
            select(account_column, func.count())
            .where(ID_COLUMNS[table] <= since.get(table, 0))
            .group_by(account_column)
        )
        for account_id, count in counted:
            facts.counts.setdefault(account_id, {})[table] = count


def _watermarks(connection: Connection) -> Watermarks:
    """The newest id of each table, as this snapshot sees it."""
    found = connection.execute(
        select(
            *[
                select(func.coalesce(func.max(column), 0)).scalar_subquery()
                for column in ID_COLUMNS.values()
            ]
        )
    ).one()
    return {table: int(value) for table, value in zip(ID_COLUMNS, found, strict=True)}


def _rows(
    connection: Connection,
    shape: Callable[..., _T],
    columns: Sequence[Any],
    *where: ColumnElement[bool],
    order_by: Any = None,
) -> list[_T]:
    query = select(*columns).where(*where)
    if order_by is not None:
        query = query.order_by(order_by)
    return [shape(*row) for row in connection.execute(query).all()]


def _grouped(rows: Iterable[_T], key: Callable[[_T], int]) -> dict[int, list[_T]]:
    """`rows` in lists by `key`, each list in the order of `rows`."""
    groups: dict[int, list[_T]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return dict(groups)


def _by_account(
    fills: Iterable[Fill],
    actions: Iterable[Action],
    fees: Iterable[Fee],
    snapshots: Iterable[Snapshot],
    calls: Iterable[MarginCall],
) -> dict[int, AccountFacts]:
    found: dict[int, AccountFacts] = defaultdict(AccountFacts)
    for fill in fills:
        found[fill.account_id].fills.append(fill)
    for action in actions:
        found[action.account_id].actions.append(action)
    for fee in fees:
        found[fee.account_id].fees.append(fee)
    for snapshot in snapshots:
        found[snapshot.account_id].snapshots.append(snapshot)
    for call in calls:
        found[call.account_id].margin_calls.append(call)
    return dict(found)


_FILL_COLUMNS = [
    FILL_TABLE.c.id,
    FILL_TABLE.c.order_id,
    FILL_TABLE.c.account_id,
    FILL_TABLE.c.symbol,
    FILL_TABLE.c.side,
    FILL_TABLE.c.quantity,
    FILL_TABLE.c.price,
    FILL_TABLE.c.notional,
    FILL_TABLE.c.fees,
    FILL_TABLE.c.currency,
    FILL_TABLE.c.filled_at,
]
_ACTION_COLUMNS = [
    CORPORATE_ACTION_TABLE.c.id,
    CORPORATE_ACTION_TABLE.c.account_id,
    CORPORATE_ACTION_TABLE.c.symbol,
    CORPORATE_ACTION_TABLE.c.kind,
    CORPORATE_ACTION_TABLE.c.ex_date,
    CORPORATE_ACTION_TABLE.c.ex_at,
    CORPORATE_ACTION_TABLE.c.ratio,
    CORPORATE_ACTION_TABLE.c.cash_per_share,
    CORPORATE_ACTION_TABLE.c.currency,
    CORPORATE_ACTION_TABLE.c.quantity_before,
    CORPORATE_ACTION_TABLE.c.quantity_delta,
    CORPORATE_ACTION_TABLE.c.fraction,
    CORPORATE_ACTION_TABLE.c.price,
    CORPORATE_ACTION_TABLE.c.cash_delta,
    CORPORATE_ACTION_TABLE.c.after_fill_id,
]
_FEE_COLUMNS = [
    BORROW_FEE_TABLE.c.id,
    BORROW_FEE_TABLE.c.account_id,
    BORROW_FEE_TABLE.c.symbol,
    BORROW_FEE_TABLE.c.day,
    BORROW_FEE_TABLE.c.quantity,
    BORROW_FEE_TABLE.c.price,
    BORROW_FEE_TABLE.c.rate_bps,
    BORROW_FEE_TABLE.c.day_count,
    BORROW_FEE_TABLE.c.amount,
    BORROW_FEE_TABLE.c.currency,
    BORROW_FEE_TABLE.c.after_fill_id,
    BORROW_FEE_TABLE.c.charged_at,
]
_SNAPSHOT_COLUMNS = [
    NAV_SNAPSHOT_TABLE.c.id,
    NAV_SNAPSHOT_TABLE.c.account_id,
    NAV_SNAPSHOT_TABLE.c.at,
    NAV_SNAPSHOT_TABLE.c.kind,
    NAV_SNAPSHOT_TABLE.c.cash,
    NAV_SNAPSHOT_TABLE.c.positions_value,
    NAV_SNAPSHOT_TABLE.c.nav,
    NAV_SNAPSHOT_TABLE.c.last_fill_id,
    NAV_SNAPSHOT_TABLE.c.last_action_id,
]
_MARK_COLUMNS = [
    NAV_MARK_TABLE.c.snapshot_id,
    NAV_MARK_TABLE.c.symbol,
    NAV_MARK_TABLE.c.quantity,
    NAV_MARK_TABLE.c.price,
    NAV_MARK_TABLE.c.value,
]
_ORDER_COLUMNS = [
    ORDER_TABLE.c.id,
    ORDER_TABLE.c.cycle_id,
    ORDER_TABLE.c.account_id,
    ORDER_TABLE.c.symbol,
    ORDER_TABLE.c.side,
    ORDER_TABLE.c.quantity,
    ORDER_TABLE.c.status,
    ORDER_TABLE.c.reason,
]
_CALL_COLUMNS = [
    MARGIN_CALL_TABLE.c.id,
    MARGIN_CALL_TABLE.c.account_id,
    MARGIN_CALL_TABLE.c.cycle_id,
    MARGIN_CALL_TABLE.c.order_id,
    MARGIN_CALL_TABLE.c.reason,
]
