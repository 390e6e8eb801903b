"""A stop at any moment of `openbell run`'s start-up, with SIGINT ignored at launch (a background
job of a script, `nohup`): the daemon exits cleanly (130 for SIGINT, 143 for SIGTERM before it
rings, 0 once it rings), with no traceback and no half-done work.

The moments are made certain rather than timed: "during the imports" is as soon as the process
catches the signal (read from /proc) and before it has written a line; "during the schema upgrade"
and "during the start-up verify" hold a Postgres lock that the step waits on until the signal has
been sent.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from openbell.store.db import make_engine
from openbell.store.migrate import current_revision, head_revision, upgrade
from openbell_testkit.cli import Daemon, config_text

#: Fresh `openbell` processes, never forked from a zygote:
#: stops during the imports of a command's start-up.
pytestmark = pytest.mark.fresh_processes

EXIT_WITHIN_S = 30.0  # from the signal (or the lock's release) to the exit, on a loaded machine
QUIET_AT = "2026-12-01T21:30:00Z"


def write_config(tmp_path: Path, store_url: str = "sqlite:///var/openbell.db") -> None:
    text_ = config_text(
        **{
            'url = "sqlite:///var/openbell.db"': f'url = "{store_url}"',
            'listen = "127.0.0.1:8787"': 'listen = "127.0.0.1:0"',
        }
    )
    (tmp_path / "openbell.toml").write_text(text_, encoding="utf-8")


@contextmanager
def launched_with_sigint_ignored(tmp_path: Path) -> Iterator[Daemon]:
    """`openbell run` started as a shell starts a background job: SIGINT ignored (inherited).

    Its fake clock starts on a Tuesday evening (UTC) when no market has a slot to catch up.
    """
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        daemon = Daemon(
            tmp_path,
            *("--heartbeat-s", "0.2", "--fake-clock", QUIET_AT),
            stop_within_s=EXIT_WITHIN_S,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    with daemon:
        yield daemon


def catches(pid: int, signum: signal.Signals) -> bool:
    """Whether process `pid` has a handler for `signum` (its SigCgt mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def wait_until_caught(daemon: Daemon, signum: signal.Signals, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not catches(daemon.process.pid, signum):
        assert daemon.process.poll() is None, "the daemon exited before catching the signal"
        assert time.monotonic() < deadline, f"the daemon never caught {signum.name}"
        time.sleep(0.002)


def ended(daemon: Daemon) -> tuple[int, str]:
    """The daemon's exit code and stderr, once it exits (within `EXIT_WITHIN_S`)."""
    try:
        code = daemon.process.wait(timeout=EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"running {EXIT_WITHIN_S}s after the stop; last lines: {daemon.lines[-3:]}")
    daemon._reader.join(timeout=5)
    assert daemon.process.stderr is not None
    return code, daemon.process.stderr.read()


def assert_stopped_cleanly(daemon: Daemon, ending: tuple[int, str], expected: int) -> list[str]:
    """The exit code, no traceback anywhere, and the events logged (none after the stop line)."""
    code, stderr = ending
    stdout = "".join(daemon.lines)
    assert "Traceback" not in stdout + stderr
    assert code == expected, f"exit {code}; stderr: {stderr!r}; stdout tail: {daemon.lines[-5:]}"
    assert stderr == ""
    events = [record["event"] for record in daemon.records(json_only=True)]
    if events:
        assert events[-1] == "daemon_stopped"
    return events


def table_counts(store_url: str) -> dict[str, int]:
    """How many accounts and cycles the ledger holds."""
    engine = make_engine(store_url)
    try:
        with engine.connect() as connection:
            accounts = connection.execute(text("SELECT count(*) FROM account")).scalar_one()
            cycles = connection.execute(text("SELECT count(*) FROM cycle")).scalar_one()
    finally:
        engine.dispose()
    return {"account": int(accounts), "cycle": int(cycles)}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_during_the_imports_ends_start_up(tmp_path: Path, signum: signal.Signals) -> None:
    write_config(tmp_path)
    with launched_with_sigint_ignored(tmp_path) as daemon:
        wait_until_caught(daemon, signum)
        assert daemon.lines == [], "the signal was caught only after start-up had begun"
        daemon.process.send_signal(signum)
        ending = ended(daemon)
    events = assert_stopped_cleanly(daemon, ending, 128 + signum)
    assert "daemon_started" not in events
    assert not (tmp_path / "var" / "openbell.db").exists()  # nothing was touched


def hold_lock(store_url: str, table: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection holding an exclusive lock on `table` of the test's schema until it rolls back.

    The connection is the test's own, not under the schema's application_name (so it is neither
    counted by `wait_until_blocked` nor terminated by a fault test).
    """
    parsed = make_url(store_url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    options = str(parsed.query["options"])
    held = psycopg.connect(conninfo, options=options, application_name="openbell-test-lock")
    held.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
    return held


def wait_until_blocked(store_url: str, timeout_s: float = 60) -> None:
    """Until a connection of the schema's own (the daemon's) waits on a lock."""
    parsed = make_url(store_url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    name = str(parsed.query["application_name"])
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(conninfo, autocommit=True, application_name="openbell-test-watch") as db:
        while True:
            row = db.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %s AND wait_event_type = 'Lock'",
                (name,),
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            assert time.monotonic() < deadline, "the daemon never waited on the lock"
            time.sleep(0.05)


def stop_while_blocked(
    tmp_path: Path, store_url: str, table: str, signum: signal.Signals, revision: str = "head"
) -> list[str]:
    """On a database migrated to `revision`, start the daemon while `table` is locked, send
    `signum` once start-up waits on the lock, then release it; the events of its clean stop."""
    upgrade(store_url, revision)
    write_config(tmp_path, store_url)
    lock = hold_lock(store_url, table)
    try:
        with launched_with_sigint_ignored(tmp_path) as daemon:
            wait_until_blocked(store_url)
            daemon.process.send_signal(signum)
            lock.rollback()  # the step goes on, and then start-up must stop
            ending = ended(daemon)
    finally:
        lock.close()
    return assert_stopped_cleanly(daemon, ending, 128 + signum)


@pytest.mark.postgres
def test_sigint_during_the_schema_upgrade_lets_it_finish_and_ends_start_up(
    tmp_path: Path, pg_url: str
) -> None:
    events = stop_while_blocked(tmp_path, pg_url, "alembic_version", signal.SIGINT, "0003")
    assert "db_upgraded" in events
    assert "daemon_started" not in events
    engine = make_engine(pg_url)
    try:
        assert current_revision(engine) == head_revision()  # the upgrade was not cut short
    finally:
        engine.dispose()
    assert table_counts(pg_url) == {"account": 0, "cycle": 0}


@pytest.mark.postgres
def test_sigterm_during_the_start_up_verify_ends_start_up(tmp_path: Path, pg_url: str) -> None:
    events = stop_while_blocked(tmp_path, pg_url, "fill", signal.SIGTERM)
    assert "ledger_verified" in events
    assert "daemon_started" not in events
    counts = table_counts(pg_url)
    assert counts["cycle"] == 0  # no cycle was claimed, so none is left half-done
    assert counts["account"] == 15  # the accounts were opened before, each in one transaction


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_once_it_rings_is_an_orderly_stop(tmp_path: Path, signum: signal.Signals) -> None:
    write_config(tmp_path)
    with launched_with_sigint_ignored(tmp_path) as daemon:
        daemon.wait_for("daemon_started")
        daemon.wait_for("daemon_heartbeat")
        daemon.process.send_signal(signum)
        ending = ended(daemon)
    events = assert_stopped_cleanly(daemon, ending, 0)
    assert events.index("daemon_started") < events.index("daemon_stopping")
    assert daemon.records(json_only=True)[-1]["reason"] == signum.name
