"""A replay's exclusive claim on its ledger (`daemon/locks.py`), on real SQLite and Postgres.

A replay refuses to start while a daemon holds the SQLite file's lock, and a daemon while a replay
does. On Postgres a replay holds an advisory lock per account: another replay of any of those
accounts is refused, holds none of its accounts and writes nothing; a replay of other accounts (or
of the same names in another schema) is not refused; and the locks of a process killed with
SIGKILL are gone, so that its `--resume` can run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select

from openbell.agents.baselines import build_agent
from openbell.daemon.locks import AccountLocks, DaemonLock
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.errors import OperatorError
from openbell.store import tables
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell_testkit.postgres import PgServer
from openbell_testkit.replay import cn_daily

START = utc(2025, 9, 1)
END = utc(2025, 9, 6)
#: How long a killed process's session may take to end on a loaded machine.
RELEASE_WITHIN_S = 30.0


def _plan(url: str, *agents: str, resume: bool = False) -> ReplayPlan:
    market = cn_daily(*(build_agent("cash", name, market="cn") for name in agents))
    return ReplayPlan(
        store_url=url, start_at=START, end_at=END, markets=(market,), resume=resume, migrate=True
    )


def _cycles(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(select(func.count()).select_from(tables.CycleRow)) or 0)
    finally:
        engine.dispose()


def test_a_replay_is_refused_while_a_daemon_holds_the_sqlite_file(sqlite_url: str) -> None:
    daemon = DaemonLock(sqlite_url)
    daemon.acquire()
    try:
        with pytest.raises(OperatorError, match=r"another openbell daemon \(pid \d+\)"):
            run_replay(_plan(sqlite_url, "cash"))
    finally:
        daemon.release()
    assert run_replay(_plan(sqlite_url, "cash")).cycles_done == 5


def test_a_daemon_is_refused_while_a_replay_holds_the_sqlite_file(sqlite_url: str) -> None:
    replay = DaemonLock(sqlite_url, role="replay")
    replay.acquire()
    try:
        with pytest.raises(OperatorError, match=r"another openbell replay \(pid \d+\)"):
            DaemonLock(sqlite_url).acquire()
    finally:
        replay.release()


@pytest.mark.postgres
def test_postgres_replays_of_one_account_exclude_each_other(pg_url: str) -> None:
    upgrade(pg_url)
    engine = make_engine(pg_url)
    held = AccountLocks(engine, [("cn", "alpha"), ("cn", "beta")])
    held.acquire()
    try:
        with pytest.raises(OperatorError, match=r"another openbell replay .* cn/beta of ledger"):
            run_replay(_plan(pg_url, "beta", "gamma"))
        assert _cycles(pg_url) == 0  # refused before it wrote anything
        assert run_replay(_plan(pg_url, "gamma")).cycles_done == 5  # other accounts run
    finally:
        held.release()
        engine.dispose()
    assert run_replay(_plan(pg_url, "alpha", "beta")).cycles_done == 10


@pytest.mark.postgres
def test_a_refused_claim_holds_none_of_its_accounts(pg_url: str) -> None:
    engine = make_engine(pg_url)
    held = AccountLocks(engine, [("cn", "beta")])
    refused = AccountLocks(engine, [("cn", "alpha"), ("cn", "beta"), ("cn", "gamma")])
    others = [AccountLocks(engine, [("cn", name)]) for name in ("alpha", "gamma")]
    try:
        held.acquire()
        with pytest.raises(OperatorError, match="cn/beta"):
            refused.acquire()
        assert not refused.held
        for lock in others:  # alpha, taken before beta was found busy, was let go
            lock.acquire()
            assert lock.held
    finally:
        for lock in (held, *others):
            lock.release()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_account_locks_are_per_schema(pg_url: str, pg_server: PgServer) -> None:
    other_url = pg_server.fresh_schema_url()
    engines = [make_engine(pg_url), make_engine(other_url)]
    locks = [AccountLocks(engine, [("cn", "alpha")]) for engine in engines]
    try:
        for lock in locks:
            lock.acquire()
        assert all(lock.held for lock in locks)
    finally:
        for lock in locks:
            lock.release()
        for engine in engines:
            engine.dispose()


_HOLDER = """
import sys, time
from openbell.daemon.locks import AccountLocks
from openbell.store.db import make_engine
AccountLocks(make_engine(sys.argv[1]), [("cn", "alpha")]).acquire()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.postgres
def test_a_killed_replays_postgres_locks_die_with_it(pg_url: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_url], stdout=subprocess.PIPE, text=True
    )
    engine = make_engine(pg_url)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        mine = AccountLocks(engine, [("cn", "alpha")])
        with pytest.raises(OperatorError, match="cn/alpha"):
            mine.acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=RELEASE_WITHIN_S)
        deadline = time.monotonic() + RELEASE_WITHIN_S
        while not mine.held:
            try:
                mine.acquire()
            except OperatorError:
                assert time.monotonic() < deadline, "the killed process's lock never went"
                time.sleep(0.1)
        mine.release()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
        engine.dispose()
