"""Read-only queries over the ledger for reports: accounts, NAV series, activity, confidences.

This module owns every read that metrics and leaderboards make of the ledger (exports are in
`store.exports`). Each query takes an engine and returns frozen dataclasses, never table rows. A
window is half-open, `start <= t < end` on the row's own instant (`at` of a snapshot, `slot_at` of
a cycle, `placed_at` of an order, `filled_at` of a fill); `None` leaves that side open. Money
stays `Decimal`; nothing here computes a statistic. An order's "outcome" for calibration is
defined in `order_confidences`. LLM usage per account sums the cycles' usage columns.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Engine, case, func, select, tuple_

from openbell.markets.domain import Side, check_utc
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    BORROW_FEE_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    TRACE_TABLE,
)
from openbell.store.records import (
    USAGE_COLUMNS,
    CycleStatus,
    CycleUsage,
    OrderStatus,
    SnapshotKind,
)
from openbell.store.traces import usage_of


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountInfo:
    """One account (an agent enrolled in a market) with its agent's name and kind."""

    account_id: int
    agent_name: str
    agent_kind: str
    market: str
    currency: str
    initial_cash: Decimal
    allow_short: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExposureRow:
    """One NAV snapshot's long and short market values (`sum(q x price)` of its marks with
    `q > 0`, and `sum(|q| x price)` with `q < 0`), beside its NAV."""

    at: datetime
    nav: Decimal
    long_value: Decimal
    short_value: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class NavRow:
    """One NAV snapshot of an account: `nav = cash + positions_value` at `at`."""

    at: datetime
    nav: Decimal
    cash: Decimal
    positions_value: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleCounts:
    """What one cycle did: its status, orders placed, orders rejected and fills made."""

    cycle_id: int
    slot_at: datetime
    status: CycleStatus
    orders: int
    rejections: int
    fills: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderConfidence:
    """A filled order's stated confidence and whether the price then moved its way.

    `next_mark_price` is the symbol's price in the first slot snapshot of the same market after the
    fill (`None` when no later snapshot marks it, and then `outcome` is `None` too).
    """

    order_id: int
    symbol: str
    side: str
    confidence: Decimal
    fill_price: Decimal
    filled_at: datetime
    next_mark_price: Decimal | None
    next_mark_at: datetime | None
    outcome: bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldingValue:
    """One holding valued in a snapshot (its NAV mark)."""

    symbol: str
    quantity: Decimal
    price: Decimal
    value: Decimal


def _window(column: Any, start: datetime | None, end: datetime | None) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if start is not None:
        check_utc("start", start)
        clauses.append(column >= start)
    if end is not None:
        check_utc("end", end)
        clauses.append(column < end)
    return clauses


def accounts(engine: Engine, market: str | None = None) -> list[AccountInfo]:
    """Every account (of `market`, when given), ordered by market then agent name."""
    account, agent = ACCOUNT_TABLE.c, AGENT_TABLE.c
    query = select(
        account.id,
        agent.name,
        agent.kind,
        account.market,
        account.currency,
        account.initial_cash,
        account.allow_short,
    ).join_from(ACCOUNT_TABLE, AGENT_TABLE, agent.id == account.agent_id)
    if market is not None:
        query = query.where(account.market == market)
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    found = [
        AccountInfo(
            account_id=int(account_id or 0),
            agent_name=name,
            agent_kind=kind,
            market=market_,
            currency=currency,
            initial_cash=initial_cash,
            allow_short=bool(allow_short),
        )
        for account_id, name, kind, market_, currency, initial_cash, allow_short in rows
    ]
    order = {"us": 0, "cn": 1, "crypto": 2}
    return sorted(found, key=lambda a: (order.get(a.market, 9), a.agent_name))


def nav_series(
    engine: Engine,
    account_id: int,
    kind: SnapshotKind | str = SnapshotKind.SLOT,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[NavRow]:
    """The account's NAV snapshots of `kind` in the window, oldest first."""
    return nav_series_of(engine, [account_id], kind, start, end)[account_id]


def nav_series_of(
    engine: Engine,
    account_ids: Sequence[int],
    kind: SnapshotKind | str = SnapshotKind.SLOT,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, list[NavRow]]:
    """`nav_series` of each of `account_ids`, read in one query."""
    kind = SnapshotKind(kind)
    snapshot = NAV_SNAPSHOT_TABLE.c
    query = (
        select(
            snapshot.account_id, snapshot.at, snapshot.nav, snapshot.cash, snapshot.positions_value
        )
        .where(
            snapshot.account_id.in_(account_ids),
            snapshot.kind == kind.value,
            *_window(snapshot.at, start, end),
        )
        .order_by(snapshot.account_id, snapshot.at)
    )
    out: dict[int, list[NavRow]] = {account_id: [] for account_id in account_ids}
    with engine.connect() as connection:
        for account_id, at, nav, cash, positions_value in connection.execute(query):
            out[account_id].append(
                NavRow(at=at, nav=nav, cash=cash, positions_value=positions_value)
            )
    return out


def last_navs_before(
    engine: Engine, account_ids: Sequence[int], before: datetime
) -> dict[int, NavRow | None]:
    """Each account's newest NAV snapshot of any kind taken before a slot at `before`: stamped
    before it, or a session's close at it (crypto's midnight close comes before the midnight
    slot); a close before a slot snapshot at the same instant. None without one. One query."""
    check_utc("before", before)
    stamped = NAV_SNAPSHOT_TABLE.c.at
    earlier = (stamped < before) | ((stamped == before) & (NAV_SNAPSHOT_TABLE.c.kind == "close"))
    newest = (
        select(
            NAV_SNAPSHOT_TABLE.c.account_id.label("account_id"),
            func.max(stamped).label("at"),
        )
        .where(NAV_SNAPSHOT_TABLE.c.account_id.in_(account_ids), earlier)
        .group_by(NAV_SNAPSHOT_TABLE.c.account_id)
        .subquery()
    )
    query = (
        select(
            NAV_SNAPSHOT_TABLE.c.account_id,
            NAV_SNAPSHOT_TABLE.c.at,
            NAV_SNAPSHOT_TABLE.c.kind,
            NAV_SNAPSHOT_TABLE.c.nav,
            NAV_SNAPSHOT_TABLE.c.cash,
            NAV_SNAPSHOT_TABLE.c.positions_value,
        )
        .join(
            newest,
            (newest.c.account_id == NAV_SNAPSHOT_TABLE.c.account_id) & (newest.c.at == stamped),
        )
        .where(earlier)
        .order_by(NAV_SNAPSHOT_TABLE.c.account_id, NAV_SNAPSHOT_TABLE.c.kind)
    )
    out: dict[int, NavRow | None] = dict.fromkeys(account_ids)
    with engine.connect() as connection:
        for account_id, at, kind, nav, cash, positions_value in connection.execute(query):
            if out[account_id] is None or kind == SnapshotKind.CLOSE.value:
                out[account_id] = NavRow(at=at, nav=nav, cash=cash, positions_value=positions_value)
    return out


def cycle_activity(
    engine: Engine, account_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[CycleCounts]:
    """Each cycle of the account with `slot_at` in the window, with its order and fill counts."""
    return cycle_activity_of(engine, [account_id], start, end)[account_id]


def cycle_activity_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, list[CycleCounts]]:
    """`cycle_activity` of each of `account_ids`, read in one query (the orders and fills of the
    window's cycles only)."""
    in_window = (
        select(CYCLE_TABLE.c.id)
        .where(
            CYCLE_TABLE.c.account_id.in_(account_ids),
            *_window(CYCLE_TABLE.c.slot_at, start, end),
        )
        .scalar_subquery()
    )
    orders = (
        select(
            ORDER_TABLE.c.cycle_id.label("cycle_id"),
            func.count().label("orders"),
            func.sum(case((ORDER_TABLE.c.status == OrderStatus.REJECTED.value, 1), else_=0)).label(
                "rejections"
            ),
        )
        .where(ORDER_TABLE.c.account_id.in_(account_ids), ORDER_TABLE.c.cycle_id.in_(in_window))
        .group_by(ORDER_TABLE.c.cycle_id)
        .subquery()
    )
    fills = (
        select(ORDER_TABLE.c.cycle_id.label("cycle_id"), func.count().label("fills"))
        .join(FILL_TABLE, FILL_TABLE.c.order_id == ORDER_TABLE.c.id)
        .where(ORDER_TABLE.c.account_id.in_(account_ids), ORDER_TABLE.c.cycle_id.in_(in_window))
        .group_by(ORDER_TABLE.c.cycle_id)
        .subquery()
    )
    query = (
        select(
            CYCLE_TABLE.c.account_id,
            CYCLE_TABLE.c.id,
            CYCLE_TABLE.c.slot_at,
            CYCLE_TABLE.c.status,
            orders.c.orders,
            orders.c.rejections,
            fills.c.fills,
        )
        .outerjoin(orders, orders.c.cycle_id == CYCLE_TABLE.c.id)
        .outerjoin(fills, fills.c.cycle_id == CYCLE_TABLE.c.id)
        .where(
            CYCLE_TABLE.c.account_id.in_(account_ids),
            *_window(CYCLE_TABLE.c.slot_at, start, end),
        )
        .order_by(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at)
    )
    out: dict[int, list[CycleCounts]] = {account_id: [] for account_id in account_ids}
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    for account_id, cycle_id, slot_at, status, n_orders, n_rejections, n_fills in rows:
        out[account_id].append(
            CycleCounts(
                cycle_id=cycle_id,
                slot_at=slot_at,
                status=CycleStatus(status),
                orders=int(n_orders or 0),
                rejections=int(n_rejections or 0),
                fills=int(n_fills or 0),
            )
        )
    return out


def traded_notionals_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, list[Decimal]]:
    """The notional of every fill of each of `account_ids` in the window (buys and sells,
    unsigned), read in one query."""
    query = (
        select(FILL_TABLE.c.account_id, FILL_TABLE.c.notional)
        .where(
            FILL_TABLE.c.account_id.in_(account_ids), *_window(FILL_TABLE.c.filled_at, start, end)
        )
        .order_by(FILL_TABLE.c.account_id, FILL_TABLE.c.id)
    )
    out: dict[int, list[Decimal]] = {account_id: [] for account_id in account_ids}
    with engine.connect() as connection:
        for account_id, notional in connection.execute(query):
            out[account_id].append(notional)
    return out


def exposures_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
    kind: SnapshotKind | str = SnapshotKind.SLOT,
) -> dict[int, list[ExposureRow]]:
    """The long and short values of every snapshot of `kind` in the window of each of
    `account_ids` (an empty list for one without), oldest first, from the snapshots' marks:
    signed quantity x price, exact."""
    kind = SnapshotKind(kind)
    found: dict[int, dict[int, list[Any]]] = {account_id: {} for account_id in account_ids}
    if not account_ids:
        return {}
    query = (
        select(
            NAV_SNAPSHOT_TABLE.c.account_id,
            NAV_SNAPSHOT_TABLE.c.id,
            NAV_SNAPSHOT_TABLE.c.at,
            NAV_SNAPSHOT_TABLE.c.nav,
            NAV_MARK_TABLE.c.quantity,
            NAV_MARK_TABLE.c.price,
        )
        .outerjoin(NAV_MARK_TABLE, NAV_MARK_TABLE.c.snapshot_id == NAV_SNAPSHOT_TABLE.c.id)
        .where(
            NAV_SNAPSHOT_TABLE.c.account_id.in_(account_ids),
            NAV_SNAPSHOT_TABLE.c.kind == kind.value,
            *_window(NAV_SNAPSHOT_TABLE.c.at, start, end),
        )
        .order_by(NAV_SNAPSHOT_TABLE.c.at, NAV_SNAPSHOT_TABLE.c.id)
    )
    with engine.connect() as connection:
        rows: Sequence[Any] = connection.execute(query).all()
        for account_id, snapshot_id, at, nav, quantity, price in rows:
            point = found[account_id].setdefault(snapshot_id, [at, nav, Decimal(0), Decimal(0)])
            if quantity is None or price is None:  # a snapshot without holdings
                continue
            if quantity > 0:
                point[2] += quantity * price
            elif quantity < 0:
                point[3] += -quantity * price
    return {
        account_id: [
            ExposureRow(at=at, nav=nav, long_value=long_value, short_value=short_value)
            for at, nav, long_value, short_value in points.values()
        ]
        for account_id, points in found.items()
    }


def borrow_fees_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, Decimal]:
    """The borrow fees charged in the window (by `charged_at`) to each of `account_ids`."""
    found = dict.fromkeys(account_ids, Decimal(0))
    if not account_ids:
        return found
    query = select(BORROW_FEE_TABLE.c.account_id, BORROW_FEE_TABLE.c.amount).where(
        BORROW_FEE_TABLE.c.account_id.in_(account_ids),
        *_window(BORROW_FEE_TABLE.c.charged_at, start, end),
    )
    with engine.connect() as connection:
        for account_id, amount in connection.execute(query):
            found[account_id] += amount
    return found


def last_snapshots(
    engine: Engine,
    account_ids: Sequence[int],
    kind: SnapshotKind | str = SnapshotKind.SLOT,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, tuple[NavRow, list[HoldingValue]]]:
    """The last snapshot of `kind` in the window and its holdings, of each of `account_ids`
    that has one, read in two queries."""
    kind = SnapshotKind(kind)
    last_at: ColumnElement[datetime] = func.max(NAV_SNAPSHOT_TABLE.c.at)
    latest = (
        select(NAV_SNAPSHOT_TABLE.c.account_id, last_at)
        .where(
            NAV_SNAPSHOT_TABLE.c.account_id.in_(account_ids),
            NAV_SNAPSHOT_TABLE.c.kind == kind.value,
            *_window(NAV_SNAPSHOT_TABLE.c.at, start, end),
        )
        .group_by(NAV_SNAPSHOT_TABLE.c.account_id)
    )
    snapshots = select(
        NAV_SNAPSHOT_TABLE.c.id,
        NAV_SNAPSHOT_TABLE.c.account_id,
        NAV_SNAPSHOT_TABLE.c.at,
        NAV_SNAPSHOT_TABLE.c.nav,
        NAV_SNAPSHOT_TABLE.c.cash,
        NAV_SNAPSHOT_TABLE.c.positions_value,
    ).where(
        NAV_SNAPSHOT_TABLE.c.kind == kind.value,
        tuple_(NAV_SNAPSHOT_TABLE.c.account_id, NAV_SNAPSHOT_TABLE.c.at).in_(latest),
    )
    found: dict[int, tuple[int, NavRow]] = {}
    with engine.connect() as connection:
        for snapshot_id, account_id, at, nav, cash, positions_value in connection.execute(
            snapshots
        ):
            nav_row = NavRow(at=at, nav=nav, cash=cash, positions_value=positions_value)
            found[int(snapshot_id or 0)] = (account_id, nav_row)
        marks = connection.execute(
            select(
                NAV_MARK_TABLE.c.snapshot_id,
                NAV_MARK_TABLE.c.symbol,
                NAV_MARK_TABLE.c.quantity,
                NAV_MARK_TABLE.c.price,
                NAV_MARK_TABLE.c.value,
            )
            .where(NAV_MARK_TABLE.c.snapshot_id.in_(found))
            .order_by(NAV_MARK_TABLE.c.snapshot_id, NAV_MARK_TABLE.c.symbol)
        ).all()
    holdings: dict[int, list[HoldingValue]] = {snapshot_id: [] for snapshot_id in found}
    for snapshot_id, symbol, quantity, price, value in marks:
        holdings[snapshot_id].append(
            HoldingValue(symbol=symbol, quantity=quantity, price=price, value=value)
        )
    return {
        account_id: (nav, holdings[snapshot_id]) for snapshot_id, (account_id, nav) in found.items()
    }


def order_confidences(
    engine: Engine, account_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[OrderConfidence]:
    """Filled orders of the account placed in the window that carry a confidence, oldest first.

    Outcome (one definition, used for ECE and Brier): the trade came true when the symbol's price
    moved in the trade's direction from the fill price to the next mark, i.e. the symbol's price in
    the first slot NAV snapshot of any account of the same market strictly after the fill. A buy
    came true when that mark is above the fill price, a sell when it is below (slippage and fees
    count against the trade; an unchanged price is not a success). When no later snapshot marks
    the symbol (say it was sold out everywhere), the outcome is `None` and calibration skips it.
    """
    query = (
        select(
            ORDER_TABLE.c.id,
            ORDER_TABLE.c.confidence,
            FILL_TABLE.c.symbol,
            FILL_TABLE.c.side,
            FILL_TABLE.c.price,
            FILL_TABLE.c.filled_at,
            ACCOUNT_TABLE.c.market,
        )
        .join(FILL_TABLE, FILL_TABLE.c.order_id == ORDER_TABLE.c.id)
        .join(ACCOUNT_TABLE, ACCOUNT_TABLE.c.id == ORDER_TABLE.c.account_id)
        .where(
            ORDER_TABLE.c.account_id == account_id,
            ORDER_TABLE.c.confidence.is_not(None),
            *_window(ORDER_TABLE.c.placed_at, start, end),
        )
        .order_by(ORDER_TABLE.c.id)
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
        if not rows:
            return []
        market = rows[0].market
        symbols = sorted({fill.symbol for fill in rows})
        first_at = min(fill.filled_at for fill in rows)
        # One row per (symbol, instant), not per account: the accounts of a slot are marked at
        # its one market snapshot, and decoding every account's copy cost seconds a year.
        marks = connection.execute(
            select(
                NAV_MARK_TABLE.c.symbol, NAV_SNAPSHOT_TABLE.c.at, func.min(NAV_MARK_TABLE.c.price)
            )
            .join(NAV_SNAPSHOT_TABLE, NAV_SNAPSHOT_TABLE.c.id == NAV_MARK_TABLE.c.snapshot_id)
            .join(ACCOUNT_TABLE, ACCOUNT_TABLE.c.id == NAV_SNAPSHOT_TABLE.c.account_id)
            .where(
                ACCOUNT_TABLE.c.market == market,
                NAV_SNAPSHOT_TABLE.c.kind == SnapshotKind.SLOT.value,
                NAV_MARK_TABLE.c.symbol.in_(symbols),
                NAV_SNAPSHOT_TABLE.c.at > first_at,
            )
            .group_by(NAV_MARK_TABLE.c.symbol, NAV_SNAPSHOT_TABLE.c.at)
        ).all()
    by_symbol: dict[str, dict[datetime, Decimal]] = {}
    for symbol, at, price in marks:
        by_symbol.setdefault(symbol, {}).setdefault(at, price)
    index = {symbol: sorted(found.items()) for symbol, found in by_symbol.items()}
    instants = {symbol: [at for at, _ in series] for symbol, series in index.items()}
    out: list[OrderConfidence] = []
    for fill in rows:
        series = index.get(fill.symbol, [])
        position = bisect.bisect_right(instants.get(fill.symbol, []), fill.filled_at)
        mark_at, mark = series[position] if position < len(series) else (None, None)
        outcome: bool | None = None
        if mark is not None:
            # A buy or cover was right when the price then rose; a sell or short when it fell.
            outcome = mark > fill.price if Side(fill.side).pays else mark < fill.price
        out.append(
            OrderConfidence(
                order_id=int(fill.id),
                symbol=fill.symbol,
                side=fill.side,
                confidence=fill.confidence if fill.confidence is not None else Decimal(0),
                fill_price=fill.price,
                filled_at=fill.filled_at,
                next_mark_price=mark,
                next_mark_at=mark_at,
                outcome=outcome,
            )
        )
    return out


def tool_calls_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, int]:
    """How many tool calls each account's cycles in the window traced (their `tool` trace
    rows), read in one query."""
    cycle, trace = CYCLE_TABLE.c, TRACE_TABLE.c
    query = (
        select(cycle.account_id, func.count())
        .join_from(TRACE_TABLE, CYCLE_TABLE, cycle.id == trace.cycle_id)
        .where(
            cycle.account_id.in_(account_ids),
            trace.role == "tool",
            *_window(cycle.slot_at, start, end),
        )
        .group_by(cycle.account_id)
    )
    out = dict.fromkeys(account_ids, 0)
    with engine.connect() as connection:
        for account_id, count in connection.execute(query):
            out[account_id] = int(count)
    return out


def tokens_per_cycle(
    engine: Engine, account_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[int]:
    """Tokens (in + out) traced per cycle that traced any, for cycles in the window."""
    tokens_in, tokens_out = TRACE_TABLE.c.tokens_in, TRACE_TABLE.c.tokens_out
    query = (
        select(func.sum(func.coalesce(tokens_in, 0) + func.coalesce(tokens_out, 0)))
        .select_from(TRACE_TABLE)
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == TRACE_TABLE.c.cycle_id)
        .where(CYCLE_TABLE.c.account_id == account_id, *_window(CYCLE_TABLE.c.slot_at, start, end))
        .group_by(TRACE_TABLE.c.cycle_id)
        .having(func.count(tokens_in) + func.count(tokens_out) > 0)
    )
    with engine.connect() as connection:
        return [int(total or 0) for (total,) in connection.execute(query)]


def llm_usage_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, tuple[int, CycleUsage]]:
    """(cycles with LLM usage, their summed usage) of each of `account_ids`, for its cycles in
    the window, read in one query.

    Cost is summed in Python (the column is text on SQLite); it is None when no cycle was priced.
    """
    cycle = CYCLE_TABLE.c
    query = (
        # The usage columns only: a cycle's times and texts are not read (nor converted).
        select(cycle.account_id, *(cycle[name] for name in USAGE_COLUMNS))
        .where(
            cycle.account_id.in_(account_ids),
            cycle.tokens_in.is_not(None),
            *_window(cycle.slot_at, start, end),
        )
        .order_by(cycle.account_id, cycle.id)
    )
    out = {account_id: (0, CycleUsage()) for account_id in account_ids}
    with engine.connect() as connection:
        for row in connection.execute(query):
            cycles, total = out[row.account_id]
            out[row.account_id] = (cycles + 1, total + usage_of(row))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportedModel:
    """One model identity an account's model exchanges reported: the response's `model`, its
    `fingerprint` (`system_fingerprint`) and the provider's `revision` headers (each None when not
    reported), from the slot of its first exchange (`first_slot_at`), with how many `exchanges`
    reported it."""

    model: str | None
    fingerprint: str | None
    revision: str | None
    first_slot_at: datetime
    exchanges: int


def reported_models_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, tuple[ReportedModel, ...]]:
    """The model identities each account's `assistant` trace rows (one per model exchange)
    reported in the window, in the order they first appeared, read in one query. More than one
    is a model change: the same configured model answered as another model or build."""
    cycle, trace = CYCLE_TABLE.c, TRACE_TABLE.c
    model, fingerprint, revision = trace.model, trace.fingerprint, trace.revision
    query = (
        select(
            cycle.account_id,
            model,
            fingerprint,
            revision,
            func.min(cycle.slot_at),
            func.min(trace.id),
            func.count(),
        )
        .join_from(TRACE_TABLE, CYCLE_TABLE, cycle.id == trace.cycle_id)
        .where(
            cycle.account_id.in_(account_ids),
            trace.role == "assistant",
            *_window(cycle.slot_at, start, end),
        )
        .group_by(cycle.account_id, model, fingerprint, revision)
    )
    found: dict[int, list[tuple[datetime, int, ReportedModel]]] = {i: [] for i in account_ids}
    with engine.connect() as connection:
        for account_id, name, print_, rev, first_at, first_id, count in connection.execute(query):
            reported = ReportedModel(
                model=name,
                fingerprint=print_,
                revision=rev,
                first_slot_at=first_at,
                exchanges=int(count),
            )
            found[account_id].append((first_at, int(first_id or 0), reported))
    return {
        account_id: tuple(reported for _at, _id, reported in sorted(rows, key=lambda r: r[:2]))
        for account_id, rows in found.items()
    }


def rejections_by_reason(
    engine: Engine, account_id: int, start: datetime | None = None, end: datetime | None = None
) -> dict[str, int]:
    """How many of the account's orders placed in the window were rejected, by reason."""
    query = (
        select(ORDER_TABLE.c.reject_reason, func.count())
        .where(
            ORDER_TABLE.c.account_id == account_id,
            ORDER_TABLE.c.status == OrderStatus.REJECTED.value,
            *_window(ORDER_TABLE.c.placed_at, start, end),
        )
        .group_by(ORDER_TABLE.c.reject_reason)
        .order_by(ORDER_TABLE.c.reject_reason)
    )
    with engine.connect() as connection:
        return {str(reason): int(count) for reason, count in connection.execute(query)}


#: How many of the latest cycles per account `ledger_version` looks at for claims still open.
RECENT_CYCLES_PER_ACCOUNT = 2


def ledger_version(engine: Engine) -> tuple[int, ...]:
    """A value that changes whenever a report read from the ledger may change, in one query of
    index lookups: the largest id of each append-only table a report reads (accounts, cycles,
    orders, fills, NAV snapshots, trace rows) and how many of the latest cycles (the last
    `RECENT_CYCLES_PER_ACCOUNT` slots' worth) are still `claimed`, since finishing a cycle
    updates its row rather than adding one. A claim older than that, finished with no other
    write, shows at the next write."""
    tables = (ACCOUNT_TABLE, CYCLE_TABLE, ORDER_TABLE, FILL_TABLE, NAV_SNAPSHOT_TABLE, TRACE_TABLE)
    latest = [select(func.coalesce(func.max(table.c.id), 0)).scalar_subquery() for table in tables]
    recent = (
        select(func.count())
        .select_from(CYCLE_TABLE)
        .where(
            CYCLE_TABLE.c.status == CycleStatus.CLAIMED.value,
            CYCLE_TABLE.c.id > latest[1] - latest[0] * RECENT_CYCLES_PER_ACCOUNT,
        )
        .scalar_subquery()
    )
    with engine.connect() as connection:
        row = connection.execute(select(*latest, recent)).one()
    return tuple(int(value) for value in row)


def market_version(engine: Engine, market: str) -> tuple[int, ...]:
    """`ledger_version` for what is read of one market: a value that changes whenever a report
    of `market` read from the ledger may change, and not when another market's slot writes. One
    query of index lookups, per account of the market (the unique (account, slot) and (account,
    at, kind) keys): how many accounts it has and the largest of their ids, the sum of the ids
    of each account's latest cycle and latest NAV snapshot, and how many of each account's
    `RECENT_CYCLES_PER_ACCOUNT` latest cycles are still `claimed`. Every write of a market is
    made by one of its cycles (orders, fills, trace rows, corporate actions at a slot, the slot's
    snapshot) before the cycle finishes, or followed by a NAV snapshot (a session's close), so
    one of these moves. A row written for an older slot alone (a `missed` cycle recorded behind
    later ones) shows at the market's next write."""
    account = ACCOUNT_TABLE
    cycle = CYCLE_TABLE.alias("version_cycle")
    nav = NAV_SNAPSHOT_TABLE.alias("version_nav")
    by_slot = (cycle.c.slot_at.desc(),)
    latest_cycle = (
        select(cycle.c.id)
        .where(cycle.c.account_id == account.c.id)
        .order_by(*by_slot)
        .limit(1)
        .scalar_subquery()
    )
    latest_nav = (
        select(nav.c.id)
        .where(nav.c.account_id == account.c.id)
        .order_by(nav.c.at.desc(), nav.c.kind.desc())
        .limit(1)
        .scalar_subquery()
    )
    claimed = [
        func.coalesce(
            select(case((cycle.c.status == CycleStatus.CLAIMED.value, 1), else_=0))
            .where(cycle.c.account_id == account.c.id)
            .order_by(*by_slot)
            .limit(1)
            .offset(back)
            .scalar_subquery(),
            0,
        )
        for back in range(RECENT_CYCLES_PER_ACCOUNT)
    ]
    query = select(
        func.count(account.c.id),
        func.coalesce(func.max(account.c.id), 0),
        func.coalesce(func.sum(latest_cycle), 0),
        func.coalesce(func.sum(latest_nav), 0),
        func.coalesce(func.sum(sum(claimed[1:], claimed[0])), 0),
    ).where(account.c.market == market)
    with engine.connect() as connection:
        row = connection.execute(query).one()
    return tuple(int(value) for value in row)
