"""Daemon parts: sd_notify over a real socket, the fake clock, retries within grace, the lock."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from openbell.daemon.clock import ScaledClock, SimulatedClock, parse_fake_clock
from openbell.daemon.http import is_loopback
from openbell.daemon.locks import DaemonLock
from openbell.daemon.retrying import RetryingSource
from openbell.daemon.runner import claim_order
from openbell.daemon.sdnotify import Notifier
from openbell.markets.domain import Bar, NewsItem, Quote
from openbell.markets.errors import DataUnavailable, OperatorError

SLOT = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)


def test_sd_notify_sends_datagrams_to_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(2)
        notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000000"})
        assert notifier.enabled
        assert notifier.watchdog_s == 20.0
        assert notifier.ready("ringing us")
        assert server.recv(4096) == b"READY=1\nSTATUS=ringing us"
        assert notifier.watchdog()
        assert server.recv(4096) == b"WATCHDOG=1"
        assert notifier.stopping()
        assert server.recv(4096).startswith(b"STOPPING=1")


def test_sd_notify_without_systemd_does_nothing() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.watchdog_s is None
    assert not notifier.ready()


def test_sd_notify_ignores_a_watchdog_meant_for_another_pid(tmp_path: Path) -> None:
    notifier = Notifier({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"})
    assert notifier.watchdog_s is None


def test_fake_clock_forms() -> None:
    clock = parse_fake_clock("2025-11-03T13:55:00Z:60")
    assert clock.speed == 60
    assert clock.now() >= datetime(2025, 11, 3, 13, 55, tzinfo=UTC)
    assert parse_fake_clock("2025-11-03T13:55:00+00:00").speed == 1
    with pytest.raises(ValueError, match="START"):
        parse_fake_clock("tomorrow")
    with pytest.raises(ValueError, match="zone"):
        parse_fake_clock("2025-11-03T13:55:00")


def test_scaled_clock_runs_at_its_speed() -> None:
    ticks = iter([100.0, 102.0])
    clock = ScaledClock(SLOT, speed=30, monotonic=lambda: next(ticks))
    assert clock.now() == SLOT + timedelta(seconds=60)


class FlakySource:
    """Fails `failures` times, then answers."""

    name = "flaky"
    market = "us"
    intervals = ("1d",)

    def __init__(self, failures: int, error: DataUnavailable | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error or DataUnavailable("vendor 503")

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        return {}

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return {"AAPL": Quote(symbol="AAPL", price=Decimal(1), at=at)}

    async def news(
        self, symbols: Sequence[str] | None, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return ()


def retrying(source: FlakySource, clock: SimulatedClock, grace_s: float) -> RetryingSource:
    async def sleep(seconds: float) -> None:
        clock.advance(timedelta(seconds=seconds))

    return RetryingSource(source, clock=clock, grace=timedelta(seconds=grace_s), sleep=sleep)


def test_retry_with_backoff_recovers_within_grace() -> None:
    clock = SimulatedClock(SLOT)
    source = FlakySource(failures=3)
    quotes = asyncio.run(retrying(source, clock, 600).quote(["AAPL"], SLOT))
    assert "AAPL" in quotes
    assert source.calls == 4
    assert clock.now() == SLOT + timedelta(seconds=1 + 2 + 4)


def test_retry_gives_up_at_the_end_of_grace() -> None:
    clock = SimulatedClock(SLOT)
    source = FlakySource(failures=100)
    with pytest.raises(DataUnavailable):
        asyncio.run(retrying(source, clock, 10).quote(["AAPL"], SLOT))
    assert source.calls == 4  # at 0, 1, 3 and 7 s; the next would start at 15 s
    assert clock.now() <= SLOT + timedelta(seconds=10)


def test_each_failed_read_is_one_event_naming_its_cause_and_symbols() -> None:
    clock = SimulatedClock(SLOT)
    source = FlakySource(failures=100, error=DataUnavailable("vendor 503", cause="http_503"))
    with capture_logs() as logs, pytest.raises(DataUnavailable):
        asyncio.run(retrying(source, clock, 10).quote(["AAPL", "MSFT"], SLOT))
    assert [(e["event"], e["attempt"], e["log_level"], e["retry_in_s"]) for e in logs] == [
        ("vendor_read_failed", 1, "warning", 1.0),
        ("vendor_read_failed", 2, "warning", 2.0),
        ("vendor_read_failed", 3, "warning", 4.0),
        ("vendor_read_failed", 4, "error", None),  # gave up: the slot's grace is over
    ]  # one line per failed read, nothing else
    for event in logs:
        assert (event["source"], event["read"], event["cause"]) == ("flaky", "quote", "http_503")
        assert event["symbols"] == ["AAPL", "MSFT"]
        assert "interval" not in event


class UnresolvableSource(FlakySource):
    """Fails every bars read as an adapter translating a DNS failure does."""

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except OSError as exc:
            raise DataUnavailable(f"vendor read failed: {exc!r}", symbols=symbols[:1]) from exc


def test_a_failed_bars_read_names_its_interval_and_the_cause_in_its_chain() -> None:
    source = UnresolvableSource(failures=0)
    with capture_logs() as logs, pytest.raises(DataUnavailable):
        asyncio.run(
            retrying(source, SimulatedClock(SLOT), 0.5).bars(["AAPL", "MSFT"], "1d", SLOT, SLOT)
        )
    (event,) = logs
    assert (event["event"], event["log_level"]) == ("vendor_read_failed", "error")
    assert (event["read"], event["interval"], event["cause"]) == ("bars", "1d", "dns")
    assert event["symbols"] == ["AAPL"]  # the symbols the adapter says failed


def test_second_daemon_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    first, second = DaemonLock(url), DaemonLock(url)
    first.acquire()
    try:
        with pytest.raises(OperatorError, match="another openbell daemon"):
            second.acquire()
    finally:
        first.release()
    second.acquire()
    second.release()
    assert not DaemonLock("postgresql+psycopg://u@h/db").held


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),  # noqa: S104
        ("10.0.0.1", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_runs_claim_a_slots_accounts_from_different_starts() -> None:
    accounts = [(account_id, object()) for account_id in range(1, 9)]
    slots = [SLOT + timedelta(hours=hour) for hour in range(4)]
    starts: set[tuple[int, ...]] = set()
    for at in slots:
        orders = [claim_order(accounts, f"daemon-{n}", at) for n in range(3)]  # type: ignore[arg-type]
        for order in orders:
            assert sorted(order, key=lambda pair: pair[0]) == accounts  # every account, once
            start = accounts.index(order[0])
            assert order == accounts[start:] + accounts[:start]  # a rotation: the order is kept
        assert orders[0] == claim_order(accounts, "daemon-0", at)  # type: ignore[arg-type]
        starts.add(tuple(order[0][0] for order in orders))
    # The three runs do not all start at one account at every slot.
    assert any(len(set(first)) > 1 for first in starts)
    assert claim_order(accounts[:1], "daemon-0", SLOT) == accounts[:1]  # type: ignore[arg-type]
