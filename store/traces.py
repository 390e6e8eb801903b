"""Trace rows and per-cycle LLM usage: what an LLM agent said and did in a cycle, and what it cost.

This module owns the reads and writes of the `trace` table and of the usage columns of `cycle`,
on behalf of `Ledger` (which exposes them as `append_journal(s)`, `traces` and `cycle_usage`).
Trace entries get the next `seq`s of their cycle when appended, so a cycle run again after an
interruption appends after the first run's rows. Usage is added, never overwritten: an agent
journals increments as it goes (a cycle cut short by its timeout keeps what it spent), and a re-run
adds its own. Many cycles' appends (the LLM agents of a slot, a turn each) are written by three
statements whatever their number: the cycles' usage and next `seq`s read in one query, then one
executemany update and one executemany insert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Connection, Engine, Row, bindparam, func, select, update

from openbell.store.core_tables import ACCOUNT_TABLE, AGENT_TABLE, CYCLE_TABLE, TRACE_TABLE
from openbell.store.records import (
    USAGE_COLUMNS,
    CycleStatus,
    CycleUsage,
    JournalAppend,
    TraceEntry,
)
from openbell.store.rows import check_fenced


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
    with engine.connect() as connection:
        cycle = connection.execute(_TRACED_CYCLE, {"cycle": cycle_id}).first()
        if cycle is None:
            return None
        return CycleTrace(
            cycle_id=cycle_id,
            agent=cycle.agent_name,
            agent_kind=cycle.agent_kind,
            market=cycle.market,
            slot_at=cycle.slot_at,
            status=CycleStatus(cycle.status),
            error_class=cycle.error_class,
            error_message=cycle.error_message,
            usage=usage_of(cycle) if has_usage(cycle) else None,
            entries=tuple(cycle_traces(connection, cycle_id)),
        )


def append_journal(
    connection: Connection,
    cycle_id: int,
    entries: Sequence[TraceEntry],
    usage: CycleUsage | None,
    *,
    fences: Mapping[int, str] | None = None,
) -> tuple[TraceEntry, ...]:
    """Append `entries` to cycle `cycle_id`'s trace and add `usage` to its usage columns; the
    stored entries, numbered with the cycle's next `seq`s.

    Prebuilt Core statements on one connection, not ORM round trips: an LLM cycle journals once
    per model turn, so this is on the agents' hot path. The cycle's row is read locked (on
    Postgres) and the cost is added in Python, exactly; the (cycle, seq) unique key refuses a
    racing duplicate.
    """
    return append_journals(
        connection,
        [JournalAppend(cycle_id=cycle_id, entries=tuple(entries), usage=usage)],
        fences=fences,
    )


def append_journals(
    connection: Connection,
    appends: Sequence[JournalAppend],
    *,
    fences: Mapping[int, str] | None = None,
) -> tuple[TraceEntry, ...]:
    """`append_journal` for each of `appends` in order (a cycle may come more than once), in three
    statements: the stored entries, with their `seq`s. `fences` (cycle id -> the run its writer
    claimed it for) are checked on the rows read (`rows.check_fenced`): `ClaimLost` when one of
    those cycles is no longer `claimed` by that run, and nothing is written.

    The cycles' rows are read (locked on Postgres, in id order) with their next `seq`s in one
    query; usage is added per cycle in Python, exactly, and written by one executemany update; the
    entries by one executemany insert.
    """
    cycles = sorted({append.cycle_id for append in appends})
    if not cycles:
        return ()
    rows = {row.id: row for row in connection.execute(_READ_CYCLES, {"cycles": cycles})}
    for cycle_id in cycles:
        if cycle_id not in rows:
            raise ValueError(f"no cycle {cycle_id}")
    if fences:
        check_fenced(fences, rows)
    added: dict[int, CycleUsage] = {}
    for append in appends:
        if append.usage is not None:
            before = added.get(append.cycle_id)
            added[append.cycle_id] = append.usage if before is None else before + append.usage
    if added:
        totals = {cycle_id: usage_of(rows[cycle_id]) + usage for cycle_id, usage in added.items()}
        connection.execute(
            _WRITE_USAGE,
            [
                {"cycle": cycle_id, **{name: getattr(total, name) for name in USAGE_COLUMNS}}
                for cycle_id, total in sorted(totals.items())
            ],
        )
    writing = [append for append in appends if append.entries]
    if not writing:
        return ()
    next_seq = {cycle_id: int(row.next_seq) for cycle_id, row in rows.items()}
    stored: list[TraceEntry] = []
    for append in writing:
        first = next_seq[append.cycle_id]
        stored.extend(
            replace(entry, seq=first + index) for index, entry in enumerate(append.entries)
        )
        next_seq[append.cycle_id] = first + len(append.entries)
    connection.execute(TRACE_TABLE.insert(), [trace_values(entry) for entry in stored])
    return tuple(stored)


def trace_values(entry: TraceEntry) -> dict[str, Any]:
    """The `trace` row of `entry` (numbered), as insert values."""
    return {
        "cycle_id": entry.cycle_id,
        "seq": entry.seq,
        "role": entry.role,
        "content": entry.content,
        "tool": entry.tool,
        "arguments": entry.arguments,
        "result": entry.result,
        "tokens_in": entry.tokens_in,
        "tokens_out": entry.tokens_out,
        "latency_ms": entry.latency_ms,
        "at": entry.at,
        "model": entry.model,
        "fingerprint": entry.fingerprint,
        "revision": entry.revision,
        "request_digest": entry.request_digest,
        "response": entry.response,
    }


_NEXT_SEQ: Final = (
    select(func.coalesce(func.max(TRACE_TABLE.c.seq), 0) + 1)
    .where(TRACE_TABLE.c.cycle_id == CYCLE_TABLE.c.id)
    .scalar_subquery()
)
_READ_CYCLES: Final = (
    select(
        *[
            CYCLE_TABLE.c.id,
            CYCLE_TABLE.c.status,
            CYCLE_TABLE.c.claimed_by,
            *(CYCLE_TABLE.c[name] for name in USAGE_COLUMNS),
            _NEXT_SEQ.label("next_seq"),
        ]
    )
    .where(CYCLE_TABLE.c.id.in_(bindparam("cycles", expanding=True)))
    .order_by(CYCLE_TABLE.c.id)
    .with_for_update(of=CYCLE_TABLE)
)
_WRITE_USAGE: Final = update(CYCLE_TABLE).where(CYCLE_TABLE.c.id == bindparam("cycle"))
_TRACED_CYCLE: Final = (
    select(
        CYCLE_TABLE,
        ACCOUNT_TABLE.c.market,
        AGENT_TABLE.c.name.label("agent_name"),
        AGENT_TABLE.c.kind.label("agent_kind"),
    )
    .join(ACCOUNT_TABLE, ACCOUNT_TABLE.c.id == CYCLE_TABLE.c.account_id)
    .join(AGENT_TABLE, AGENT_TABLE.c.id == ACCOUNT_TABLE.c.agent_id)
    .where(CYCLE_TABLE.c.id == bindparam("cycle"))
)
_TRACES: Final = (
    select(TRACE_TABLE)
    .where(TRACE_TABLE.c.cycle_id == bindparam("cycle"))
    .order_by(TRACE_TABLE.c.seq)
)


def cycle_traces(connection: Connection, cycle_id: int) -> list[TraceEntry]:
    """Every trace entry of `cycle_id`, in `seq` order."""
    rows = connection.execute(_TRACES, {"cycle": cycle_id}).all()
    return [_entry(row) for row in rows]


def _entry(row: Row[Any]) -> TraceEntry:
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
        model=row.model,
        fingerprint=row.fingerprint,
        revision=row.revision,
        request_digest=row.request_digest,
        response=row.response,
    )


def usage_of(row: Row[Any]) -> CycleUsage:
    """The usage stored on a cycle row, or on a row of its usage columns (zeros where nothing was
    recorded)."""
    return CycleUsage(
        tokens_in=row.tokens_in or 0,
        tokens_out=row.tokens_out or 0,
        tokens_cached=row.tokens_cached or 0,
        usage_estimated=bool(row.usage_estimated),
        llm_latency_ms=row.llm_latency_ms or 0,
        cost=Decimal(row.cost) if row.cost is not None else None,
        parse_failures=row.parse_failures or 0,
        invalid_tool_calls=row.invalid_tool_calls or 0,
        llm_attempts=row.llm_attempts or 0,
        llm_failed_attempts=row.llm_failed_attempts or 0,
    )


def llm_spend(
    connection: Connection, account_id: int, start: datetime | None, end: datetime
) -> Decimal:
    """The priced cost of the account's cycles whose slot is in `[start, end)` (`start` None:
    from the first), summed in Python (the column is text on SQLite)."""
    query = select(CYCLE_TABLE.c.cost).where(
        CYCLE_TABLE.c.account_id == account_id,
        CYCLE_TABLE.c.cost.is_not(None),
        CYCLE_TABLE.c.slot_at < end,
        *(() if start is None else (CYCLE_TABLE.c.slot_at >= start,)),
    )
    costs = connection.execute(query).scalars()
    return sum((Decimal(cost) for cost in costs if cost is not None), Decimal(0))


def has_usage(row: Row[Any]) -> bool:
    """Whether any usage was ever recorded on the cycle (an LLM agent's cycle)."""
    return row.tokens_in is not None
