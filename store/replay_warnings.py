"""The warnings replays ran under: `ReplayWarnings`, the `replay_warning` table's reads and writes.

A replay that proceeds despite a doubt (a universe with members without data, a universe used
outside the dates its file vouches for) records each warning with its market and window, so that
`openbell report` repeats it beside the figures it qualifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select

from openbell.markets.domain import check_utc
from openbell.store.core_tables import REPLAY_WARNING_TABLE
from openbell.store.db import SQLITE_IMMEDIATE

_ROWS = REPLAY_WARNING_TABLE.c


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayWarning:
    """One warning of a replay of `market` over `[start_at, end_at)`."""

    market: str
    start_at: datetime
    end_at: datetime
    message: str


class ReplayWarnings:
    """The `replay_warning` rows of the ledger on `engine` (SQLite or Postgres)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    def record(self, warnings: Sequence[ReplayWarning]) -> None:
        """Record `warnings` (a replay run's, once)."""
        for warning in warnings:
            check_utc("start_at", warning.start_at)
            check_utc("end_at", warning.end_at)
        if not warnings:
            return
        rows = [
            {
                "market": w.market,
                "start_at": w.start_at,
                "end_at": w.end_at,
                "message": w.message,
            }
            for w in warnings
        ]
        with self._writer.begin() as connection:
            connection.execute(REPLAY_WARNING_TABLE.insert(), rows)

    def of_market(self, market: str) -> tuple[ReplayWarning, ...]:
        """The distinct warnings recorded for `market`, oldest replay first."""
        query = select(REPLAY_WARNING_TABLE).where(_ROWS.market == market).order_by(_ROWS.id)
        with self._engine.connect() as connection:
            found = [
                ReplayWarning(
                    market=row.market,
                    start_at=row.start_at,
                    end_at=row.end_at,
                    message=row.message,
                )
                for row in connection.execute(query)
            ]
        seen: dict[str, ReplayWarning] = {}
        for warning in found:
            seen.setdefault(warning.message, warning)
        return tuple(seen.values())
