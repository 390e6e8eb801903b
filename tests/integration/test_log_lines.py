"""Logs a person can read: what the daemon writes when its bells start and when a slot is offline.

The offline slot is one US slot of the nasdaq100 universe and the five baseline agents, run as the
daemon runs it (the live desks, the retrying source, the cycle runner, a real SQLite ledger) over
real yfinance and real curl whose names cannot resolve (DNS over HTTPS at a refused loopback
port): nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yfinance as yf
from curl_cffi import CurlOpt
from curl_cffi import requests as curl_requests

from openbell.agents.baselines import build_agent
from openbell.daemon.clock import SimulatedClock, SystemClock
from openbell.daemon.plan import MarketPlan, build_desks
from openbell.daemon.runner import CycleRunner
from openbell.daemon.scheduler import Bells, MarketBell
from openbell.markets.adapters.yfinance import YahooSource
from openbell.markets.universes import load_universe
from openbell.ops.logs.rendering import configure_logging
from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.logs import logging_restored
from openbell_testkit.offline import closed_port, refuse_network

BASELINES = ("buy_and_hold", "equal_weight", "sma_crossover", "cash", "random")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def start_bells(stream: io.StringIO, **logging_options: Any) -> list[dict[str, Any]]:
    configure_logging("json", "info", stream, environ={}, **logging_options)
    clock = SystemClock()

    async def nothing(market: str, at: datetime) -> None:
        return None

    async def main() -> None:
        bells = Bells(
            clock=clock,
            bells=[
                MarketBell(market=market, cadence="hourly", grace=timedelta(minutes=15))
                for market in ("us", "cn", "crypto")
            ],
            on_slot=nothing,
            on_close=nothing,
            on_missed=nothing,
            on_horizon_check=lambda: None,
        )
        bells.start()
        bells.shutdown()

    asyncio.run(main())
    return lines(stream)


def test_starting_the_bells_writes_one_line_not_apschedulers_chatter() -> None:
    written = start_bells(io.StringIO())
    assert [line["event"] for line in written] == ["bells_started"]


def test_apschedulers_lines_come_when_asked_for() -> None:
    written = start_bells(io.StringIO(), third_party_level="info")
    chatter = [line for line in written if line["logger"].startswith("apscheduler")]
    assert chatter, "APScheduler's own lines were asked for"
    assert {line["event"] for line in chatter} == {"third_party_log"}
    assert any(line["message"].startswith("Adding job tentatively") for line in chatter)


@pytest.fixture
def unresolvable_yahoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """A curl session, as yfinance's own, whose every name fails to resolve at once."""
    refuse_network(monkeypatch)
    yf.set_tz_cache_location(str(tmp_path / "yf-cache"))
    yf.data.YfData.cache_get.cache_clear()
    doh = f"https://127.0.0.1:{closed_port()}/dns-query"
    return curl_requests.Session(impersonate="chrome", curl_options={CurlOpt.DOH_URL: doh})


def test_one_offline_us_slot_is_a_few_lines_naming_the_dns_failure(
    tmp_path: Path, unresolvable_yahoo: object
) -> None:
    slot_at = datetime(2025, 11, 4, 15, 30, tzinfo=UTC)  # 10:30 in New York, a Tuesday
    clock = SimulatedClock(slot_at)
    universe = load_universe("nasdaq100")
    market = MarketPlan(
        market="us",
        source=YahooSource(now=clock.now, universe=universe.symbols, session=unresolvable_yahoo),
        universe=universe,
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=tuple(build_agent(kind, kind, market="us", seed=1) for kind in BASELINES),
        grace=timedelta(seconds=1.5),  # one retry (after 1 s), then the slot is given up
    )
    assert market.is_slot(slot_at)
    url = f"sqlite:///{tmp_path / 'openbell.db'}"
    upgrade(url)
    engine = make_engine(url)
    stream = io.StringIO()
    configure_logging("json", "info", stream, environ={})
    try:
        ledger = Ledger(engine)
        desks, accounts = build_desks(
            [market], ledger, clock.now(), clock=clock, cache=SqlBarCache(engine)
        )
        runner = CycleRunner(
            ledger=ledger, desks=desks, run_id="offline", lease=timedelta(minutes=15)
        )
        report = asyncio.run(runner.run_slot("us", slot_at, accounts["us"], clock.now()))
    finally:
        engine.dispose()
    written = lines(stream)

    assert len(report.outcomes) == len(BASELINES)
    assert report.count(None) == 0
    # No third-party line below warning, and none of yfinance's (617 of them before).
    third_party = [line for line in written if not line["logger"].startswith("openbell")]
    assert not [line for line in third_party if line["level"] in ("debug", "info")]
    assert not [line for line in third_party if line["logger"].startswith("yfinance")]
    # One event per failed read, naming the true cause and the symbols.
    failed = [line for line in written if line["event"] == "vendor_read_failed"]
    assert [(line["attempt"], line["level"]) for line in failed] == [(1, "warning"), (2, "error")]
    for line in failed:
        assert (line["source"], line["read"], line["cause"]) == ("yfinance", "quote", "dns")
        assert line["symbols"] == len(set(market.universe.symbols) | {"QQQ"})
        assert line["example"] in market.universe.symbols
        assert "timed out" not in line["error_message"]
    skipped = [line for line in written if line["event"] == "cycle_skipped"]
    assert len(skipped) == len(BASELINES)
    assert len(written) == len(failed) + len(skipped), [line["event"] for line in written]
