"""The live daemon runs of a ledger: which run started ringing which market, and when.

This module owns `DaemonRuns`. A live daemon records its start once per market it rings. A
market's earliest start is when a daemon first rang it on this ledger: the health check counts
overdue slots only from there, so a fresh install is not overdue for slots that rang before it
existed, while a restarted daemon still answers for the slots it slept through.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import check_utc
from openbell.store.core_tables import DAEMON_RUN_TABLE
from openbell.store.db import SQLITE_IMMEDIATE

_RUNS = DAEMON_RUN_TABLE.c


class DaemonRuns:
    """The `daemon_run` rows of the ledger on `engine` (SQLite or Postgres)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    def record_start(
        self, run_id: str, markets: Collection[str], now: datetime
    ) -> dict[str, datetime]:
        """Record that run `run_id` starts ringing `markets` at `now` (once per run and market);
        per market, when a daemon first rang it on this ledger (`now` for a new one)."""
        check_utc("now", now)
        for market in markets:
            try:
                with self._writer.begin() as connection:
                    connection.execute(
                        DAEMON_RUN_TABLE.insert(),
                        {"run_id": run_id, "market": market, "started_at": now},
                    )
            except IntegrityError:  # this run recorded it already
                pass
        with self._engine.connect() as connection:
            return _first_started(connection, markets)

    def first_started(self) -> dict[str, datetime]:
        """Per market ever rung on this ledger, when a daemon first rang it."""
        with self._engine.connect() as connection:
            return _first_started(connection, None)


def _first_started(connection: Connection, markets: Collection[str] | None) -> dict[str, datetime]:
    query = select(_RUNS.market, func.min(_RUNS.started_at)).group_by(_RUNS.market)
    if markets is not None:
        query = query.where(_RUNS.market.in_(sorted(markets)))
    return {market: started_at for market, started_at in connection.execute(query).all()}
