"""Trace rows and per-cycle LLM usage: what an LLM agent said and did in a cycle, and what it cost.

This module owns the reads and writes of the `trace` table and of the usage columns of `cycle`,
on behalf of `Ledger` (which exposes them as `add_trace`, `traces`, `add_usage` and
`cycle_usage`). A trace entry gets the next `seq` of its cycle when added, so a cycle run again
after an interruption appends after the first run's rows. Usage is added, never overwritten:
an agent records increments as it goes (a cycle cut short by its timeout keeps what it spent),
and a re-run adds its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Engine, func, insert
from sqlmodel import Session, col, select

from openbell.store.records import CycleStatus, CycleUsage, TraceEntry
from openbell.store.tables import AccountRow, AgentRow, CycleRow, TraceRow


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleTrace:
    """A cycle with its agent, status, LLM usage (None for an agent without a model) and trace."""

    cycle_id: int
    agent: str
    agent_kind: str
    market: str
    slot_at: datetime
    status: CycleStatus
    error_class: str | None
    error_message: str | None
    usage: CycleUsage | None
    entries: tuple[TraceEntry, ...]


def cycle_trace(engine: Engine, cycle_id: int) -> CycleTrace | None:
    """What `openbell trace` shows of cycle `cycle_id`, or None when there is no such cycle."""
    with Session(engine) as session:
        found = session.exec(
            select(CycleRow, AccountRow, AgentRow)
            .join(AccountRow, col(AccountRow.id) == CycleRow.account_id)
            .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
            .where(CycleRow.id == cycle_id)
        ).first()
        if found is None:
            return None
        cycle, account, agent = found
        return CycleTrace(
            cycle_id=cycle_id,
            agent=agent.name,
            agent_kind=agent.kind,
            market=account.market,
            slot_at=cycle.slot_at,
            status=CycleStatus(cycle.status),
            error_class=cycle.error_class,
            error_message=cycle.error_message,
            usage=usage_of(cycle) if has_usage(cycle) else None,
            entries=tuple(cycle_traces(session, cycle_id)),
        )


def insert_trace(session: Session, entry: TraceEntry) -> TraceEntry:
    """Add `entry` as the next row of its cycle; the stored entry (with its `seq`).

    One Core statement, not an ORM round trip: an LLM cycle writes a row per message and per tool
    call as it goes, so this is on the agents' hot path. The cycle's foreign key refuses an
    unknown cycle; the (cycle, seq) unique key refuses a racing duplicate.
    """
    if session.get(CycleRow, entry.cycle_id) is None:
        raise ValueError(f"no cycle {entry.cycle_id}")
    table = TraceRow.__table__  # type: ignore[attr-defined]  # SQLModel sets it on table classes
    seq = session.execute(
        select(func.coalesce(func.max(TraceRow.seq), 0) + 1).where(
            TraceRow.cycle_id == entry.cycle_id
        )
    ).scalar_one()
    session.execute(
        insert(table).values(
            cycle_id=entry.cycle_id,
            seq=seq,
            role=entry.role,
            content=entry.content,
            tool=entry.tool,
            arguments=entry.arguments,
            result=entry.result,
            tokens_in=entry.tokens_in,
            tokens_out=entry.tokens_out,
            latency_ms=entry.latency_ms,
            at=entry.at,
        )
    )
    return replace(entry, seq=seq)


def cycle_traces(session: Session, cycle_id: int) -> list[TraceEntry]:
    """Every trace entry of `cycle_id`, in `seq` order."""
    rows = session.exec(
        select(TraceRow).where(TraceRow.cycle_id == cycle_id).order_by(col(TraceRow.seq))
    ).all()
    return [_entry(row) for row in rows]


def _entry(row: TraceRow) -> TraceEntry:
    return TraceEntry(
        cycle_id=row.cycle_id,
        seq=row.seq,
        role=row.role,
        at=row.at,
        content=row.content,
        tool=row.tool,
        arguments=row.arguments,
        result=row.result,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        latency_ms=row.latency_ms,
    )


def add_usage(session: Session, cycle_id: int, usage: CycleUsage) -> CycleUsage:
    """Add `usage` to the cycle's usage columns (locking its row); the cycle's new total."""
    row = session.get(CycleRow, cycle_id, with_for_update=True)
    if row is None:
        raise ValueError(f"no cycle {cycle_id}")
    total = usage_of(row) + usage
    row.tokens_in = total.tokens_in
    row.tokens_out = total.tokens_out
    row.tokens_cached = total.tokens_cached
    row.usage_estimated = total.usage_estimated
    row.llm_latency_ms = total.llm_latency_ms
    row.cost = total.cost
    row.parse_failures = total.parse_failures
    row.invalid_tool_calls = total.invalid_tool_calls
    return total


def usage_of(row: CycleRow) -> CycleUsage:
    """The usage stored on a cycle row (zeros where nothing was recorded)."""
    return CycleUsage(
        tokens_in=row.tokens_in or 0,
        tokens_out=row.tokens_out or 0,
        tokens_cached=row.tokens_cached or 0,
        usage_estimated=bool(row.usage_estimated),
        llm_latency_ms=row.llm_latency_ms or 0,
        cost=Decimal(row.cost) if row.cost is not None else None,
        parse_failures=row.parse_failures or 0,
        invalid_tool_calls=row.invalid_tool_calls or 0,
    )


def has_usage(row: CycleRow) -> bool:
    """Whether any usage was ever recorded on the cycle (an LLM agent's cycle)."""
    return row.tokens_in is not None
