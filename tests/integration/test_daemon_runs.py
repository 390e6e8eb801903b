"""The daemon runs of a ledger, on SQLite and Postgres: each market's first start is kept across
later runs, a market rung for the first time starts its own, and a ledger migrated from before
the table counts from its first accounts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    insert,
    select,
)

from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell.store.types import ExactDecimal, UtcDateTime

T0 = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


def test_the_first_start_of_each_market_is_kept(engine: Engine) -> None:
    runs = DaemonRuns(engine)
    assert runs.first_started() == {}
    assert runs.record_start("a:1:x", ["us", "crypto"], T0) == {"us": T0, "crypto": T0}
    later = T0 + timedelta(days=3)
    assert runs.record_start("b:2:y", ["crypto", "cn"], later) == {"crypto": T0, "cn": later}
    assert runs.record_start("b:2:y", ["crypto", "cn"], later) == {"crypto": T0, "cn": later}
    assert runs.first_started() == {"us": T0, "crypto": T0, "cn": later}


def test_a_ledger_from_before_gets_its_first_accounts_as_first_starts(db_url: str) -> None:
    upgrade(db_url, "0004")
    engine = make_engine(db_url)
    try:
        # Written as a ledger of revision 0004 holds them (today's `Ledger` writes later columns).
        metadata = MetaData()
        agent = Table(
            "agent",
            metadata,
            Column("id", Integer, primary_key=True),
            Column("name", String),
            Column("kind", String),
            Column("created_at", UtcDateTime),
        )
        account = Table(
            "account",
            metadata,
            Column("id", Integer, primary_key=True),
            Column("agent_id", Integer),
            Column("market", String),
            Column("currency", String),
            Column("initial_cash", ExactDecimal),
            Column("cash", ExactDecimal),
            Column("paused", Boolean),
            Column("created_at", UtcDateTime),
        )
        opened = [("cash", "us", T0), ("cash", "cn", T0 + timedelta(hours=1))]
        opened.append(("random", "us", T0 - timedelta(days=2)))
        with engine.begin() as connection:
            for name in ("cash", "random"):
                connection.execute(insert(agent).values(name=name, kind=name, created_at=T0))
            ids = {name: id_ for name, id_ in connection.execute(select(agent.c.name, agent.c.id))}
            for name, market, at in opened:
                connection.execute(
                    insert(account).values(
                        agent_id=ids[name],
                        market=market,
                        currency="USD" if market == "us" else "CNY",
                        initial_cash=Decimal(1000),
                        cash=Decimal(1000),
                        paused=False,
                        created_at=at,
                    )
                )
        upgrade(db_url)
        first = DaemonRuns(engine).first_started()
    finally:
        engine.dispose()
    assert first == {"us": T0 - timedelta(days=2), "cn": T0 + timedelta(hours=1)}
