"""The ccxt adapter against recorded Binance payloads, through ccxt's real binance parser.

The async exchange's `fetch` is replaced by a fake that answers from recorded JSON, calls ccxt's
`on_rest_response` hook and, for an error status, runs ccxt's own error mapping (`handle_errors`,
`handle_http_status_code`), exactly as the real `fetch` does after a response. Any real
connection attempt fails the test.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import ccxt.async_support as ccxt_async
import pytest

from openbell.markets.adapters.ccxt import CcxtSource
from openbell.markets.adapters.failures import failure_cause
from openbell.markets.errors import (
    ConfigError,
    DataUnavailable,
    IntervalUnavailable,
    RateLimited,
    SymbolUnavailable,
)
from openbell_testkit.offline import refuse_network, sync

PAYLOADS = Path(__file__).parents[1] / "resources" / "vendors" / "binance"
HOUR_MS = 3_600_000


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch)


def payload(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


Answer = tuple[int, Any]


class FakeBinance:
    """Serves recorded Binance REST payloads by URL; records the URLs asked."""

    def __init__(self, exchange: Any, routes: dict[str, Callable[[str], Answer]]) -> None:
        self.exchange = exchange
        self.routes = {"/api/v3/exchangeInfo": lambda url: (200, payload("exchangeInfo.json"))}
        self.routes.update(routes)
        self.urls: list[str] = []

    async def fetch(
        self, url: str, method: str = "GET", headers: Any = None, body: Any = None
    ) -> Any:
        self.urls.append(url)
        for fragment, route in self.routes.items():
            if fragment in url:
                status, parsed = route(url)
                break
        else:
            status, parsed = 404, {"code": -1, "msg": "no route"}
        text = json.dumps(parsed)
        self.exchange.on_rest_response(status, "", url, method, {}, text, headers, body)
        if status != 200:
            self.exchange.handle_errors(status, "", url, method, {}, text, parsed, headers, body)
            self.exchange.handle_http_status_code(status, "", url, method, text)
        return parsed


def make_source(
    now: datetime, routes: dict[str, Callable[[str], Answer]], **options: Any
) -> tuple[CcxtSource, FakeBinance]:
    exchange = ccxt_async.binance(
        {
            "enableRateLimit": False,
            "options": {"fetchMarkets": {"types": ["spot"]}, "fetchCurrencies": False},
        }
    )
    fake = FakeBinance(exchange, routes)
    exchange.fetch = fake.fetch
    return CcxtSource(exchange, now=lambda: now, **options), fake


KLINES = {"/api/v3/klines": lambda url: (200, payload("klines_BTCUSDT_1h.json"))}
# 2025-07-08 01:30 UTC: the 01:00 candle (the recording's last) is still open.
NOW = datetime(2025, 7, 8, 1, 30, tzinfo=UTC)
WINDOW = (datetime(2025, 7, 7, 22, tzinfo=UTC), NOW)


@sync
async def test_closed_candles_with_since_in_milliseconds() -> None:
    source, fake = make_source(NOW, KLINES)
    try:
        bars = (await source.bars(["BTC/USDT"], "1h", *WINDOW))["BTC/USDT"]
    finally:
        await source.close()
    assert [bar.start_at.hour for bar in bars] == [22, 23, 0]  # the repeated 23:00 row once
    assert bars[0].open == Decimal("108271.01")
    assert bars[0].end_at == datetime(2025, 7, 7, 23, tzinfo=UTC)
    assert bars[2].volume == Decimal("120.05")
    klines = [url for url in fake.urls if "/klines" in url]
    assert "startTime=1751925600000" in klines[0]
    assert "symbol=BTCUSDT" in klines[0]


@sync
async def test_instrument_facts_come_from_the_markets() -> None:
    source, _ = make_source(NOW, {})
    try:
        btc = await source.instrument("BTC/USDT")
        with pytest.raises(SymbolUnavailable):
            await source.instrument("LUNA/USDT")
    finally:
        await source.close()
    assert (btc.quantity_step, btc.price_tick, btc.min_notional) == (
        Decimal("0.00001"),
        Decimal("0.01"),
        Decimal(5),
    )
    assert btc.currency == "USDT"
    assert source.name == "ccxt:binance"


@sync
async def test_a_delisted_symbol_is_left_out() -> None:
    source, fake = make_source(NOW, KLINES)
    try:
        found = await source.bars(["BTC/USDT", "LUNA/USDT"], "1h", *WINDOW)
    finally:
        await source.close()
    assert set(found) == {"BTC/USDT"}
    assert not any("LUNA" in url for url in fake.urls)


@sync
async def test_an_invalid_symbol_answer_leaves_the_symbol_out() -> None:
    invalid = {"/api/v3/klines": lambda url: (400, payload("error_invalid_symbol.json"))}
    source, _ = make_source(NOW, invalid)
    try:
        assert await source.bars(["ETH/USDT"], "1h", *WINDOW) == {}
    finally:
        await source.close()


@sync
async def test_an_empty_answer_is_no_bars() -> None:
    source, _ = make_source(NOW, {"/api/v3/klines": lambda url: (200, [])})
    try:
        assert await source.bars(["BTC/USDT"], "1h", *WINDOW) == {}
    finally:
        await source.close()


@pytest.mark.parametrize(
    ("status", "body", "error", "cause"),
    [
        (429, payload("error_rate_limit.json"), RateLimited, "http_429"),
        (
            418,
            {"code": -1003, "msg": "Way too much request weight used; IP banned"},
            RateLimited,
            "http_418",
        ),
        (
            503,
            {"code": -1001, "msg": "Internal error; unable to process your request."},
            DataUnavailable,
            "http_503",
        ),
        (
            401,
            {"code": -2015, "msg": "Invalid API-key, IP, or permissions for action."},
            ConfigError,
            None,
        ),
    ],
)
def test_vendor_errors_are_translated(
    status: int, body: Any, error: type[Exception], cause: str | None
) -> None:
    async def scenario() -> None:
        failing = {"/api/v3/klines": lambda url: (status, body)}
        source, _ = make_source(NOW, failing)
        try:
            with pytest.raises(error) as raised:
                await source.bars(["BTC/USDT"], "1h", *WINDOW)
        finally:
            await source.close()
        if cause is not None:
            assert failure_cause(raised.value) == cause

    asyncio.run(scenario())


@sync
async def test_an_unresolvable_exchange_is_a_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def unresolvable(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)  # aiohttp's resolver, for real
    source = CcxtSource.create("binance", now=lambda: NOW)
    try:
        with pytest.raises(DataUnavailable) as raised:
            await source.bars(["BTC/USDT"], "1h", *WINDOW)
    finally:
        await source.close()
    assert failure_cause(raised.value) == "dns"


@sync
async def test_a_hung_exchange_times_out() -> None:
    async def hang(url: str, method: str = "GET", headers: Any = None, body: Any = None) -> Any:
        await asyncio.sleep(10)

    source, fake = make_source(NOW, {}, timeout_s=0.05)
    fake.exchange.fetch = hang
    try:
        with pytest.raises(DataUnavailable, match="timed out"):
            await source.bars(["BTC/USDT"], "1h", *WINDOW)
    finally:
        await source.close()


@sync
async def test_nan_rows_are_dropped() -> None:
    rows = payload("klines_BTCUSDT_1h.json")
    rows[0][1] = "NaN"
    rows[3][4] = None
    source, _ = make_source(NOW, {"/api/v3/klines": lambda url: (200, rows)})
    try:
        bars = (await source.bars(["BTC/USDT"], "1h", *WINDOW))["BTC/USDT"]
    finally:
        await source.close()
    assert [bar.start_at.hour for bar in bars] == [23]


@sync
async def test_quotes_from_one_tickers_call_never_after_at() -> None:
    at = datetime(2025, 7, 8, 1, 0, tzinfo=UTC)
    tickers = {"/api/v3/ticker/24hr": lambda url: (200, payload("ticker_24hr.json"))}
    source, fake = make_source(at, tickers)
    try:
        found = await source.quote(["BTC/USDT", "LUNA/USDT"], at)
        with pytest.raises(DataUnavailable, match="live"):
            await source.quote(["BTC/USDT"], datetime(2025, 7, 1, tzinfo=UTC))
    finally:
        await source.close()
    assert set(found) == {"BTC/USDT"}
    assert found["BTC/USDT"].price == Decimal(108050)
    assert found["BTC/USDT"].at == at  # closeTime 02:00 is after `at`: capped
    assert len([url for url in fake.urls if "ticker" in url]) == 1


@sync
async def test_intervals_and_news() -> None:
    source, _ = make_source(NOW, {})
    try:
        with pytest.raises(IntervalUnavailable):
            await source.bars(["BTC/USDT"], "5m", *WINDOW)
        assert await source.news(None, *WINDOW, limit=5) == ()
    finally:
        await source.close()


def test_an_unknown_exchange_is_an_operator_error() -> None:
    with pytest.raises(ConfigError):
        CcxtSource.create("nosuchexchange", now=lambda: NOW)


def test_the_network_guard_refuses_a_real_connection() -> None:
    with pytest.raises(AssertionError, match="network"):
        socket.create_connection(("127.0.0.1", 9))
