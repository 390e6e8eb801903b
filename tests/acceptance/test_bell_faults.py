"""`openbell run` for real, on a fast fake clock, with faults across its bells: SQLite refusing
every write across a bell (the process may write no byte to any file: `RLIMIT_FSIZE` 0, set on the
running daemon) and the daemon frozen with SIGSTOP across several bells. Each bell leaves its
rows: a slot whose store comes back inside the grace runs late and is done, one whose store stays
away past it is `missed` (`store_unavailable`) for every account, and each bell slept through in
a stall is `missed` (`daemon_stalled`)."""

from __future__ import annotations

import resource
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from openbell.markets.slots import slots_between
from openbell_testkit.cli import CRYPTO_1H, Daemon, cycle_rows
from openbell_testkit.cli import assert_ledger_verifies as assert_verifies

CRYPTO_HOURLY = f"""
[store]
url = "sqlite:///var/openbell.db"

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


def start(tmp_path: Path, start_at: datetime, speed: float) -> Daemon:
    (tmp_path / "openbell.toml").write_text(CRYPTO_HOURLY, encoding="utf-8")
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


def run_with_writes_refused(tmp_path: Path, restore_at: datetime, end_at: datetime) -> list[str]:
    speed = 900.0  # the 15-minute grace is one real second
    with start(tmp_path, BELL - timedelta(minutes=20), speed) as daemon:
        clock = daemon_clock(daemon, speed)
        sleep_until(clock, BELL - timedelta(minutes=3), speed)
        restore = refuse_writes(daemon.process.pid)
        sleep_until(clock, restore_at, speed)
        restore()
        sleep_until(clock, end_at, speed)
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    return [record["event"] for record in daemon.records(json_only=True)]


def test_sqlite_writes_back_inside_the_grace_run_the_slot_late(tmp_path: Path) -> None:
    restore_at = BELL + timedelta(minutes=6)
    events = run_with_writes_refused(tmp_path, restore_at, BELL + timedelta(minutes=40))
    assert "slot_failed" in events  # the bell did meet a store that refused it
    rows = [row for row in cycle_rows(tmp_path) if row.slot_at == BELL]
    assert len(rows) == 2, rows
    assert {row.status for row in rows} == {"done"}
    assert all(restore_at - timedelta(minutes=2) <= row.started_at <= BELL + GRACE for row in rows)
    assert_verifies(tmp_path)


def test_sqlite_writes_refused_past_the_grace_leave_each_account_missed(tmp_path: Path) -> None:
    events = run_with_writes_refused(
        tmp_path, BELL + GRACE + timedelta(minutes=6), BELL + timedelta(minutes=45)
    )
    assert "slot_failed" in events
    rows = [row for row in cycle_rows(tmp_path) if row.slot_at == BELL]
    assert len(rows) == 2, rows
    assert {(row.status, row.reason) for row in rows} == {("missed", "store_unavailable")}
    assert_verifies(tmp_path)


def test_a_daemon_stopped_across_three_bells_records_each_missed(tmp_path: Path) -> None:
    speed = 3600.0  # an hourly bell every real second
    with start(tmp_path, MONDAY + timedelta(minutes=50), speed) as daemon:
        clock = daemon_clock(daemon, speed)
        sleep_until(clock, MONDAY + timedelta(hours=1, minutes=20), speed)
        daemon.process.send_signal(signal.SIGSTOP)
        time.sleep(timedelta(hours=3, minutes=20).total_seconds() / speed)
        daemon.process.send_signal(signal.SIGCONT)
        sleep_until(clock, MONDAY + timedelta(hours=5, minutes=50), speed)
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    rows = cycle_rows(tmp_path)
    assert max(Counter((row.account_id, row.slot_at) for row in rows).values()) == 1
    accounts = {row.account_id for row in rows}
    assert len(accounts) == 2
    first, last = MONDAY + timedelta(hours=1), MONDAY + timedelta(hours=5)
    for slot_at in slots_between("crypto", "hourly", first, last + timedelta(minutes=1)):
        found = [row for row in rows if row.slot_at == slot_at]
        assert {row.account_id for row in found} == accounts, (slot_at, found)
    stalled = {
        (row.slot_at, row.status, row.reason)
        for row in rows
        if MONDAY + timedelta(hours=2) <= row.slot_at < last
    }
    assert stalled == {
        (MONDAY + timedelta(hours=hour), "missed", "daemon_stalled") for hour in (2, 3, 4)
    }, rows
    assert_verifies(tmp_path)
