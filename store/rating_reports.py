"""The stored rating reports of an account: the `ratings` trace rows of its cycles.

This module owns `rating_reports`, the read `openbell report` measures a rating agent's calibration
from, and `rating_reports_of`, the same for many accounts over a window (the behavioural metrics and
the Market Insights reports read them so), with `tool_results_of` (every row of a tool: a report's
sections, the judge's verdicts) and `window_cycles_of` (the accounts' cycles). A rating agent stores
each cycle's report as a trace row (role `tool`, tool `ratings`: `agents.rating.agent`), so it needs
no table of its own and is written through the same journal (and, in a replay, the same batch) as
the rest of the cycle's trace. A cycle with more than one such row (run again after an interruption)
counts with its last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Engine, select

from openbell.store.core_tables import CYCLE_TABLE, TRACE_TABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredReport:
    """One cycle's stored report: its slot and the row's text (`rating.report.report_json`)."""

    cycle_id: int
    slot_at: datetime
    text: str


def rating_reports(engine: Engine, account_id: int, tool: str) -> tuple[StoredReport, ...]:
    """The account's reports stored as trace rows of `tool`, one per cycle, by slot."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(CYCLE_TABLE.c.id, CYCLE_TABLE.c.slot_at, TRACE_TABLE.c.result)
            .join(TRACE_TABLE, TRACE_TABLE.c.cycle_id == CYCLE_TABLE.c.id)
            .where(
                CYCLE_TABLE.c.account_id == account_id,
                TRACE_TABLE.c.role == "tool",
                TRACE_TABLE.c.tool == tool,
            )
            .order_by(CYCLE_TABLE.c.slot_at, TRACE_TABLE.c.seq)
        ).all()
    found: dict[int, StoredReport] = {}
    for cycle_id, slot_at, text in rows:
        if text is not None and cycle_id is not None:
            found[cycle_id] = StoredReport(cycle_id=cycle_id, slot_at=slot_at, text=text)
    return tuple(sorted(found.values(), key=lambda report: report.slot_at))


def slot_times(engine: Engine, account_id: int) -> tuple[datetime, ...]:
    """The slots of every cycle of the account, in order."""
    with engine.connect() as connection:
        return tuple(
            connection.execute(
                select(CYCLE_TABLE.c.slot_at)
                .where(CYCLE_TABLE.c.account_id == account_id)
                .order_by(CYCLE_TABLE.c.slot_at)
            ).scalars()
        )


def rating_reports_of(
    engine: Engine,
    account_ids: Sequence[int],
    tool: str,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, tuple[StoredReport, ...]]:
    """Each account's reports stored as trace rows of `tool` in cycles whose slot is in
    `[start, end)`, one per cycle (its last), by slot."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                CYCLE_TABLE.c.account_id,
                CYCLE_TABLE.c.id,
                CYCLE_TABLE.c.slot_at,
                TRACE_TABLE.c.result,
            )
            .join(TRACE_TABLE, TRACE_TABLE.c.cycle_id == CYCLE_TABLE.c.id)
            .where(
                CYCLE_TABLE.c.account_id.in_(account_ids),
                TRACE_TABLE.c.role == "tool",
                TRACE_TABLE.c.tool == tool,
                *_window(start, end),
            )
            .order_by(CYCLE_TABLE.c.slot_at, TRACE_TABLE.c.seq)
        ).all()
    found: dict[int, dict[int, StoredReport]] = {account_id: {} for account_id in account_ids}
    for account_id, cycle_id, slot_at, text in rows:
        if text is not None and cycle_id is not None:
            found[account_id][cycle_id] = StoredReport(
                cycle_id=cycle_id, slot_at=slot_at, text=text
            )
    return {
        account_id: tuple(sorted(reports.values(), key=lambda report: report.slot_at))
        for account_id, reports in found.items()
    }


def _window(start: datetime | None, end: datetime | None) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if start is not None:
        clauses.append(CYCLE_TABLE.c.slot_at >= start)
    if end is not None:
        clauses.append(CYCLE_TABLE.c.slot_at < end)
    return clauses


def tool_results_of(
    engine: Engine,
    account_ids: Sequence[int],
    tool: str,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, dict[int, list[str]]]:
    """Each account's trace rows of role `tool` and tool `tool` in cycles whose slot is in
    `[start, end)`: account id -> cycle id -> the rows' results, in order."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.id, TRACE_TABLE.c.result)
            .join(TRACE_TABLE, TRACE_TABLE.c.cycle_id == CYCLE_TABLE.c.id)
            .where(
                CYCLE_TABLE.c.account_id.in_(account_ids),
                TRACE_TABLE.c.role == "tool",
                TRACE_TABLE.c.tool == tool,
                *_window(start, end),
            )
            .order_by(CYCLE_TABLE.c.slot_at, TRACE_TABLE.c.seq)
        ).all()
    found: dict[int, dict[int, list[str]]] = {account_id: {} for account_id in account_ids}
    for account_id, cycle_id, text in rows:
        if text is not None and cycle_id is not None:
            found[account_id].setdefault(cycle_id, []).append(text)
    return found


def window_cycles_of(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, tuple[tuple[int, datetime], ...]]:
    """Each account's cycles whose slot is in `[start, end)`, as (cycle id, slot), by slot."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(CYCLE_TABLE.c.account_id, CYCLE_TABLE.c.id, CYCLE_TABLE.c.slot_at)
            .where(CYCLE_TABLE.c.account_id.in_(account_ids), *_window(start, end))
            .order_by(CYCLE_TABLE.c.slot_at)
        ).all()
    found: dict[int, list[tuple[int, datetime]]] = {account_id: [] for account_id in account_ids}
    for account_id, cycle_id, slot_at in rows:
        if cycle_id is not None:
            found[account_id].append((cycle_id, slot_at))
    return {account_id: tuple(cycles) for account_id, cycles in found.items()}
