"""The retrying source: retries with backoff within a slot's grace, one event per failed read."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from structlog.testing import capture_logs

from openbell.daemon.clock import SimulatedClock
from openbell.daemon.retrying import RetryingSource
from openbell.markets.domain import Bar, NewsItem, Quote
from openbell.markets.errors import DataUnavailable

SLOT = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)


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
        assert (event["symbols"], event["example"]) == (2, "AAPL")
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
    assert (event["symbols"], event["example"]) == (1, "AAPL")  # those the adapter says failed


def test_a_failed_read_of_a_whole_market_is_one_short_line() -> None:
    """300 symbols and a vendor error spanning lines: the line says how many, one of them and the
    error's first line, and stays short (the 2,143 characters of issue 28 listed every symbol)."""
    symbols = [f"{code:06d}" for code in range(600000, 600300)]
    long_error = "HTTPSConnectionPool(host='push2.eastmoney.com'): " + "x" * 900 + "\nTraceback ..."
    source = FlakySource(failures=100, error=DataUnavailable(long_error, symbols=symbols))
    with capture_logs() as logs, pytest.raises(DataUnavailable):
        asyncio.run(retrying(source, SimulatedClock(SLOT), 0.5).quote(symbols, SLOT))
    (event,) = logs
    assert (event["symbols"], event["example"]) == (300, "600000")
    assert event["error_message"].startswith("HTTPSConnectionPool(host='push2.eastmoney.com')")
    assert "Traceback" not in event["error_message"]
    assert len(json.dumps(event, default=str)) < 400
