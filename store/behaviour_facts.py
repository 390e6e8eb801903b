"""The ledger facts behind the behavioural metrics: each cycle's net trades and its protocol.

This module owns two reads that `ops.evaluation.behaviour_report` turns into Herculean's behavioural
metrics, for many accounts in a few queries. `cycle_trades_of`: every cycle of the accounts in the
window with its slot, status and, per symbol, the net signed quantity and net signed notional of its
fills (buys positive, sells negative), and each account's net quantity per symbol from the fills of
the cycles before the window (what it held as the window opened). `protocol_facts_of`: every cycle
in the window with its status, the number of its trace rows, the stop reason an LLM agent's loop
recorded (a trace row of role `stop`), whether the agent (or its decision mode) called `finish` (a
`finish` tool row other than the one openbell makes in its place, whose content is `called by
openbell`), whether it stored a report (a tool row of the caller's `report_tool`: a rating agent's
`ratings`) and the outcome of its strategy run (`strategy_run`). The window is half-open on the
cycle's `slot_at`. Money and quantities stay `Decimal`; nothing here computes a statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from sqlalchemy import ColumnElement, Engine, func, or_, select

from openbell.markets.domain import Side, check_utc
from openbell.store.core_tables import (
    CYCLE_TABLE,
    FILL_TABLE,
    ORDER_TABLE,
    STRATEGY_RUN_TABLE,
    TRACE_TABLE,
)
from openbell.store.records import CycleStatus

#: The content of the `finish` row an LLM agent's loop writes when the model never called it.
AUTO_FINISH_CONTENT = "called by openbell"


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleTrades:
    """One cycle's net trades per symbol: signed quantity and signed notional (buys positive)."""

    cycle_id: int
    slot_at: datetime
    status: CycleStatus
    quantities: Mapping[str, Decimal] = field(default_factory=dict)
    notionals: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountTrades:
    """An account's net quantities before the window, and its cycles in the window, in order."""

    opening: Mapping[str, Decimal]
    cycles: tuple[CycleTrades, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolFacts:
    """How one cycle ended, as its status and its trace tell it."""

    cycle_id: int
    status: CycleStatus
    trace_rows: int
    stop_reason: str | None
    agent_finished: bool
    reported: bool = False
    strategy_outcome: str | None = None


def _in_window(start: datetime | None, end: datetime | None) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if start is not None:
        check_utc("start", start)
        clauses.append(CYCLE_TABLE.c.slot_at >= start)
    if end is not None:
        check_utc("end", end)
        clauses.append(CYCLE_TABLE.c.slot_at < end)
    return clauses


def cycle_trades_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    with_opening: bool = True,
) -> dict[int, AccountTrades]:
    """Each account's opening quantities and its cycles' net trades (see the module docstring).

    Without `with_opening` the fills before `start` are not read and every opening is empty (for a
    caller that kept the openings of an earlier read and asks for the later cycles only)."""
    cycles_query = (
        select(
            CYCLE_TABLE.c.account_id,
            CYCLE_TABLE.c.id,
            CYCLE_TABLE.c.slot_at,
            CYCLE_TABLE.c.status,
        )
        .where(CYCLE_TABLE.c.account_id.in_(account_ids), *_in_window(start, end))
        .order_by(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at)
    )
    upto = _in_window(None if with_opening else start, end)
    fills_query = (
        select(
            FILL_TABLE.c.account_id,
            ORDER_TABLE.c.cycle_id,
            CYCLE_TABLE.c.slot_at,
            FILL_TABLE.c.symbol,
            FILL_TABLE.c.side,
            FILL_TABLE.c.quantity,
            FILL_TABLE.c.notional,
        )
        .join(ORDER_TABLE, ORDER_TABLE.c.id == FILL_TABLE.c.order_id)
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == ORDER_TABLE.c.cycle_id)
        .where(FILL_TABLE.c.account_id.in_(account_ids), *upto)
        .order_by(FILL_TABLE.c.id)
    )
    with engine.connect() as connection:
        cycle_rows = connection.execute(cycles_query).all()
        fill_rows = connection.execute(fills_query).all()
    opening: dict[int, dict[str, Decimal]] = {account_id: {} for account_id in account_ids}
    quantities: dict[int, dict[str, Decimal]] = {}
    notionals: dict[int, dict[str, Decimal]] = {}
    for account_id, cycle_id, slot_at, symbol, side, quantity, notional in fill_rows:
        sign = Decimal(Side(side).sign)
        if start is not None and slot_at < start:
            held = opening[account_id]
            held[symbol] = held.get(symbol, Decimal(0)) + sign * quantity
            continue
        by_symbol = quantities.setdefault(cycle_id, {})
        by_symbol[symbol] = by_symbol.get(symbol, Decimal(0)) + sign * quantity
        values = notionals.setdefault(cycle_id, {})
        values[symbol] = values.get(symbol, Decimal(0)) + sign * notional
    cycles: dict[int, list[CycleTrades]] = {account_id: [] for account_id in account_ids}
    for account_id, row_id, slot_at, status in cycle_rows:
        if row_id is None:  # never: an id is assigned on insert
            continue
        cycles[account_id].append(
            CycleTrades(
                cycle_id=row_id,
                slot_at=slot_at,
                status=CycleStatus(status),
                quantities=quantities.get(row_id, {}),
                notionals=notionals.get(row_id, {}),
            )
        )
    return {
        account_id: AccountTrades(
            opening={s: q for s, q in opening[account_id].items() if q != 0},
            cycles=tuple(cycles[account_id]),
        )
        for account_id in account_ids
    }


def protocol_facts_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    report_tool: str | None = None,
) -> dict[int, list[ProtocolFacts]]:
    """Each account's cycles in the window with how they ended (see the module docstring)."""
    window = _in_window(start, end)
    cycles_query = (
        select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.id, CYCLE_TABLE.c.status)
        .where(CYCLE_TABLE.c.account_id.in_(account_ids), *window)
        .order_by(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.slot_at)
    )
    counts_query = (
        select(TRACE_TABLE.c.cycle_id, func.count())
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == TRACE_TABLE.c.cycle_id)
        .where(CYCLE_TABLE.c.account_id.in_(account_ids), *window)
        .group_by(TRACE_TABLE.c.cycle_id)
    )
    endings_query = (
        select(
            TRACE_TABLE.c.cycle_id, TRACE_TABLE.c.role, TRACE_TABLE.c.tool, TRACE_TABLE.c.content
        )
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == TRACE_TABLE.c.cycle_id)
        .where(
            CYCLE_TABLE.c.account_id.in_(account_ids),
            *window,
            or_(
                TRACE_TABLE.c.role == "stop",
                TRACE_TABLE.c.tool.in_(
                    ["finish"] if report_tool is None else ["finish", report_tool]
                ),
            ),
        )
        .order_by(TRACE_TABLE.c.cycle_id, TRACE_TABLE.c.seq)
    )
    runs_query = (
        select(STRATEGY_RUN_TABLE.c.cycle_id, STRATEGY_RUN_TABLE.c.outcome)
        .join(CYCLE_TABLE, CYCLE_TABLE.c.id == STRATEGY_RUN_TABLE.c.cycle_id)
        .where(CYCLE_TABLE.c.account_id.in_(account_ids), *window)
    )
    with engine.connect() as connection:
        cycle_rows = connection.execute(cycles_query).all()
        counts = {cycle_id: int(n) for cycle_id, n in connection.execute(counts_query)}
        ending_rows = connection.execute(endings_query).all()
        outcomes = {cycle_id: outcome for cycle_id, outcome in connection.execute(runs_query)}
    stops: dict[int, str | None] = {}
    finished: set[int] = set()
    reported: set[int] = set()
    for cycle_id, role, tool, content in ending_rows:
        if role == "stop":
            stops[cycle_id] = content
        elif tool == "finish" and content != AUTO_FINISH_CONTENT:
            finished.add(cycle_id)
        elif tool == report_tool and tool != "finish":
            reported.add(cycle_id)
    out: dict[int, list[ProtocolFacts]] = {account_id: [] for account_id in account_ids}
    for account_id, row_id, status in cycle_rows:
        if row_id is None:  # never: an id is assigned on insert
            continue
        out[account_id].append(
            ProtocolFacts(
                cycle_id=row_id,
                status=CycleStatus(status),
                trace_rows=counts.get(row_id, 0),
                stop_reason=stops.get(row_id),
                agent_finished=row_id in finished,
                reported=row_id in reported,
                strategy_outcome=outcomes.get(row_id),
            )
        )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleCensus:
    """The accounts' cycles in a range of slots, told apart by their ids: how many, the largest
    id and the ids' sum (a row added, deleted or replaced there changes one of them)."""

    count: int
    max_id: int
    id_sum: int

    @classmethod
    def of(cls, cycle_ids: Sequence[int]) -> CycleCensus:
        """The census of the cycles `cycle_ids`."""
        return cls(count=len(cycle_ids), max_id=max(cycle_ids, default=0), id_sum=sum(cycle_ids))


def cycle_census(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None,
    before: datetime,
) -> CycleCensus:
    """The census of the accounts' cycles with `start <= slot_at < before` (one query)."""
    query = select(
        func.count(),
        func.coalesce(func.max(CYCLE_TABLE.c.id), 0),
        func.coalesce(func.sum(CYCLE_TABLE.c.id), 0),
    ).where(CYCLE_TABLE.c.account_id.in_(account_ids), *_in_window(start, before))
    with engine.connect() as connection:
        count, max_id, id_sum = connection.execute(query).one()
    return CycleCensus(count=int(count or 0), max_id=int(max_id or 0), id_sum=int(id_sum or 0))
