"""`openbell run` for real, on a fast fake clock, with faults across its bells: SQLite refusing
every write across a bell (the process may write no byte to any file: `RLIMIT_FSIZE` 0, set on the
running daemon) and the daemon frozen with SIGSTOP across several bells. Each bell leaves its
rows: a slot whose store comes back inside the grace runs late and is done, one whose store stays
away past it is `missed` (`store_unavailable`) for every account, and each bell slept through in
a stall is `missed` (`daemon_stalled`), on SQLite and Postgres."""

from __future__ import annotations

import resource
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from openbell.markets.slots import slots_between
from openbell_testkit.cli import CRYPTO_1H, Daemon, cycle_rows
from openbell_testkit.cli import assert_ledger_verifies as assert_verifies
from openbell_testkit.live import cycles, verifies

CRYPTO_HOURLY = f"""
[store]
url = "{{url}}"

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "replay:{CRYPTO_1H}"
initial_cash = "10000"

[[agents]]
name = "equal-weight"
kind = "equal_weight"
markets = ["crypto"]

[[agents]]
name = "random"
kind = "random"
markets = ["crypto"]
seed = 3
"""
MONDAY = datetime.fromisoformat("2025-11-03T00:00:00+00:00")
BELL = MONDAY + timedelta(hours=2)
GRACE = timedelta(minutes=15)  # the hourly cadence's default


SQLITE_URL = "sqlite:///var/openbell.db"


def start(tmp_path: Path, start_at: datetime, speed: float, url: str = SQLITE_URL) -> Daemon:
    config = CRYPTO_HOURLY.replace("{url}", url)
    (tmp_path / "openbell.toml").write_text(config, encoding="utf-8")
    fake_clock = f"{start_at.isoformat().replace('+00:00', 'Z')}:{speed:g}"
    args = ("--fake-clock", fake_clock, "--lease-s", "1800", "--heartbeat-s", "0.1")
    return Daemon(tmp_path, *args, stop_within_s=30)


def daemon_clock(daemon: Daemon, speed: float) -> Callable[[], datetime]:
    """The daemon's fake clock as seen from here, read off its first heartbeat line (written
    with the clock's time, a moment before it is read here)."""
    daemon.wait_for("daemon_heartbeat")
    seen_s = time.monotonic()
    beat = next(r for r in daemon.records(json_only=True) if r["event"] == "daemon_heartbeat")
    now_at = datetime.fromisoformat(beat["now_at"])
    return lambda: now_at + timedelta(seconds=(time.monotonic() - seen_s) * speed)


def sleep_until(clock: Callable[[], datetime], at: datetime, speed: float) -> None:
    time.sleep(max(0.0, (at - clock()).total_seconds() / speed))


def refuse_writes(pid: int) -> Callable[[], None]:
    """Let process `pid` write no byte to any file (SQLite's writes fail: `disk I/O error`);
    the function returned lifts the limit."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, hard))
    return lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))


def run_with_writes_refused(
    tmp_path: Path, *, restore_after: str, restore_at: datetime
) -> tuple[datetime, list[dict[str, Any]]]:
    """Run a daemon from 01:40, refusing its writes from 01:57, across the 02:00 bell, until it
    has logged `restore_after` and its clock shows `restore_at`; then for 25 clock minutes more.
    When the writes were allowed again (by the clock), and the daemon's log lines."""
    speed = 900.0  # the 15-minute grace is one real second
    with start(tmp_path, BELL - timedelta(minutes=20), speed) as daemon:
        clock = daemon_clock(daemon, speed)
        sleep_until(clock, BELL - timedelta(minutes=3), speed)
        restore = refuse_writes(daemon.process.pid)
        daemon.wait_for(restore_after, timeout_s=30)
        sleep_until(clock, restore_at, speed)
        restored_at = clock()
        restore()
        sleep_until(clock, restored_at + timedelta(minutes=25), speed)
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    return restored_at, daemon.records(json_only=True)


def test_sqlite_writes_back_inside_the_grace_run_the_slot_late(tmp_path: Path) -> None:
    restored_at, records = run_with_writes_refused(
        tmp_path, restore_after="slot_failed", restore_at=BELL + timedelta(minutes=5)
    )
    assert restored_at < BELL + GRACE - timedelta(minutes=3), "the machine was too slow"
    [failed] = [r for r in records if r["event"] == "slot_failed"]
    assert (failed["cause"], failed["error_class"]) == ("store_unavailable", "OperationalError")
    [late] = [r for r in records if r["event"] == "slot_ran_late"]
    assert late["slot_at"] == BELL.isoformat()
    assert late["late_s"] >= (restored_at - BELL).total_seconds() - 60
    rows = [row for row in cycle_rows(tmp_path) if row.slot_at == BELL]
    assert len(rows) == 2, rows
    assert {row.status for row in rows} == {"done"}
    assert all(BELL < row.started_at <= BELL + GRACE for row in rows)
    assert_verifies(tmp_path)


def test_sqlite_writes_refused_past_the_grace_leave_each_account_missed(tmp_path: Path) -> None:
    run_with_writes_refused(
        tmp_path, restore_after="slot_not_run", restore_at=BELL + GRACE + timedelta(minutes=3)
    )
    rows = [row for row in cycle_rows(tmp_path) if row.slot_at == BELL]
    assert len(rows) == 2, rows
    assert {(row.status, row.reason) for row in rows} == {("missed", "store_unavailable")}
    assert_verifies(tmp_path)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_daemon_stopped_across_three_bells_records_each_missed(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = SQLITE_URL if backend == "sqlite" else request.getfixturevalue("pg_url")
    speed = 3600.0  # an hourly bell every real second
    with start(tmp_path, MONDAY + timedelta(minutes=50), speed, url) as daemon:
        clock = daemon_clock(daemon, speed)
        # The first bell at least five minutes after the daemon is up (start-up takes a while).
        up_at = clock() + timedelta(minutes=5)
        first = up_at.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        sleep_until(clock, first + timedelta(minutes=20), speed)
        daemon.process.send_signal(signal.SIGSTOP)
        time.sleep(timedelta(hours=3, minutes=20).total_seconds() / speed)
        daemon.process.send_signal(signal.SIGCONT)
        sleep_until(clock, first + timedelta(hours=4, minutes=50), speed)
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    ledger_url = url if backend == "postgres" else f"sqlite:///{tmp_path / 'var' / 'openbell.db'}"
    rows = cycles(ledger_url)
    assert max(Counter((row.account_id, row.slot_at) for row in rows).values()) == 1
    accounts = {row.account_id for row in rows}
    assert len(accounts) == 2
    last = first + timedelta(hours=4)
    for slot_at in slots_between("crypto", "hourly", first, last + timedelta(minutes=1)):
        found = [row for row in rows if row.slot_at == slot_at]
        assert {row.account_id for row in found} == accounts, (slot_at, found)
    stalled = {
        (row.slot_at, row.status, row.reason)
        for row in rows
        if first + timedelta(hours=1) <= row.slot_at < last
    }
    assert stalled == {
        (first + timedelta(hours=hours), "missed", "daemon_stalled") for hours in (1, 2, 3)
    }, rows
    if backend == "sqlite":
        assert_verifies(tmp_path)
    else:
        assert verifies(url)
