"""The daemon runs of a ledger, on SQLite and Postgres: each market's first start is kept across
later runs, a market rung for the first time starts its own, and a ledger migrated from before
the table counts from its first accounts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade

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
        ledger = Ledger(engine)
        agent_id = ledger.ensure_agent("cash", "cash", T0)
        ledger.open_account(agent_id, "us", "USD", Decimal(1000), T0)
        ledger.open_account(agent_id, "cn", "CNY", Decimal(1000), T0 + timedelta(hours=1))
        other = ledger.ensure_agent("random", "random", T0)
        ledger.open_account(other, "us", "USD", Decimal(1000), T0 - timedelta(days=2))
        upgrade(db_url)
        first = DaemonRuns(engine).first_started()
    finally:
        engine.dispose()
    assert first == {"us": T0 - timedelta(days=2), "cn": T0 + timedelta(hours=1)}
