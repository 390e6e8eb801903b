"""The yfinance adapter against recorded Yahoo payloads served by a fake `requests` transport.

yfinance runs for real (its URL building, JSON parsing, frame assembly); only the HTTP layer is
replaced, and any real connection attempt fails the test.
"""

from __future__ import annotations

import logging
import socket
import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yfinance as yf
from requests.models import PreparedRequest

from openbell.markets.adapters.failures import failure_cause
from openbell.markets.adapters.yfinance.parse import split_ratio
from openbell.markets.corporate_actions import ActionKind
from openbell.markets.errors import (
    DataUnavailable,
    IntervalUnavailable,
    RateLimited,
    SymbolUnavailable,
)
from openbell.markets.fundamentals import LiveFundamentals
from openbell_testkit.offline import refuse_network, sync
from openbell_testkit.yahoo import Route, charts, payload, source


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch, with_curl=True)


@pytest.fixture(autouse=True)
def _isolated_yfinance(tmp_path: Path) -> None:
    yf.set_tz_cache_location(str(tmp_path / "yf-cache"))
    yf.data.YfData.cache_get.cache_clear()


# 2025-07-09 15:00 New York: the 2025-07-09 daily bar is still in progress.
MID_SESSION = datetime(2025, 7, 9, 19, 0, tzinfo=UTC)
WEEK = (datetime(2025, 7, 6, tzinfo=UTC), datetime(2025, 7, 10, tzinfo=UTC))
DAILY = {"AAPL": (200, payload("chart_AAPL_1d.json")), "MSFT": (200, payload("chart_MSFT_1d.json"))}


@sync
async def test_daily_bars_for_the_universe_in_one_download() -> None:
    yahoo, adapter = source([charts(DAILY)], MID_SESSION, universe=("AAPL", "MSFT"))
    found = await yahoo.bars(["AAPL"], "1d", *WEEK)
    assert [bar.start_at for bar in found["AAPL"]] == [
        datetime(2025, 7, 7, 13, 30, tzinfo=UTC),
        datetime(2025, 7, 8, 13, 30, tzinfo=UTC),
    ]  # the 2025-07-09 bar is in progress at `now` and dropped
    first = found["AAPL"][0]
    assert first.end_at == datetime(2025, 7, 7, 20, 0, tzinfo=UTC)
    assert (first.open, first.close, first.volume) == (
        Decimal("209.79"),
        Decimal("209.95"),
        Decimal(50229000),
    )
    # MSFT came with the same download; its NaN row is dropped; no second request is made.
    chart_calls = len([u for u in adapter.urls if "period1" in u])
    msft = await yahoo.bars(["MSFT"], "1d", *WEEK)
    assert [bar.start_at.day for bar in msft["MSFT"]] == [7]
    assert len([u for u in adapter.urls if "period1" in u]) == chart_calls == 2


@sync
async def test_hourly_bars_are_start_labelled_and_end_at_the_close() -> None:
    hourly = {"AAPL": (200, payload("chart_AAPL_1h.json"))}
    after_close = datetime(2025, 7, 8, 20, 0, tzinfo=UTC)
    yahoo, _ = source([charts(hourly)], after_close)
    bars = (await yahoo.bars(["AAPL"], "1h", *WEEK))["AAPL"]
    assert [bar.start_at.hour for bar in bars] == [13, 14, 15, 16, 17, 18, 19]
    assert bars[-1].end_at == after_close  # 15:30-16:00, half an hour long
    assert bars[1].volume == Decimal(5200000)  # the repeated 10:30 row is ignored
    assert len({bar.start_at for bar in bars}) == len(bars)

    during_last_bar = datetime(2025, 7, 8, 19, 45, tzinfo=UTC)
    yahoo, _ = source([charts(hourly)], during_last_bar)
    assert len((await yahoo.bars(["AAPL"], "1h", *WEEK))["AAPL"]) == 6


@sync
async def test_a_symbol_yahoo_does_not_know_is_left_out() -> None:
    yahoo, _ = source([charts(DAILY)], MID_SESSION)
    found = await yahoo.bars(["AAPL", "GONE"], "1d", *WEEK)
    assert set(found) == {"AAPL"}


@sync
async def test_a_429_swallowed_by_download_raises_rate_limited() -> None:
    yahoo, _ = source([(r"/v8/finance/chart/", lambda r: (429, "Too Many Requests"))], MID_SESSION)
    with pytest.raises(RateLimited) as raised:
        await yahoo.bars(["AAPL"], "1d", *WEEK)
    assert failure_cause(raised.value) == "http_429"
    assert raised.value.symbols == ("AAPL",)


@sync
async def test_yahoo_answering_an_error_status_names_the_status() -> None:
    # yfinance swallows the 500 and reads its page as JSON; the adapter sees the answer itself.
    down = [(r"finance\.yahoo\.com/v\d+/", lambda r: (500, "<html>Internal Server Error</html>"))]
    yahoo, _ = source(down, MID_SESSION, universe=("AAPL", "MSFT"))
    with pytest.raises(DataUnavailable, match="http_500") as raised:
        await yahoo.bars(["AAPL"], "1d", *WEEK)
    assert failure_cause(raised.value) == "http_500"


def vendor_events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, Any, Any]]:
    return [
        (str(record.msg), getattr(record, "symbols", None), getattr(record, "cause", None))
        for record in caplog.records
        if record.name == "openbell.markets.adapters.yfinance.source"
    ]


@sync
async def test_a_symbol_whose_requests_failed_is_left_out_with_one_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = {**DAILY, "MSFT": (503, "<html>Service Unavailable</html>")}
    yahoo, _ = source([charts(down)], MID_SESSION, universe=("AAPL", "MSFT"))
    with caplog.at_level(logging.WARNING, logger="openbell.markets.adapters.yfinance.source"):
        found = await yahoo.bars(["AAPL", "MSFT"], "1d", *WEEK)
    assert set(found) == {"AAPL"}
    assert vendor_events(caplog) == [("vendor_symbols_failed", ["MSFT"], "http_503")]


@sync
async def test_a_request_yfinance_retried_with_success_is_no_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = iter([(401, {"finance": {"error": {"code": "Unauthorized"}}})])

    def stale_crumb_once(request: PreparedRequest) -> tuple[int, Any]:
        return next(answers, (200, payload("chart_AAPL_1d.json")))

    yahoo, _ = source([(r"/v8/finance/chart/AAPL", stale_crumb_once)], MID_SESSION)
    with caplog.at_level(logging.WARNING, logger="openbell.markets.adapters.yfinance.source"):
        found = await yahoo.bars(["AAPL"], "1d", *WEEK)
    assert set(found) == {"AAPL"}
    assert vendor_events(caplog) == []


@sync
async def test_an_empty_frame_for_a_window_with_sessions_is_unavailable() -> None:
    empty = {"AAPL": (200, {"chart": {"result": None, "error": None}})}
    yahoo, _ = source([charts(empty)], MID_SESSION)
    with pytest.raises(DataUnavailable) as raised:
        await yahoo.bars(["AAPL"], "1d", *WEEK)
    assert failure_cause(raised.value) == "empty"


@sync
async def test_an_empty_weekend_is_not_an_error() -> None:
    yahoo, _ = source([charts(DAILY)], MID_SESSION)
    weekend = (datetime(2025, 7, 5, 4, tzinfo=UTC), datetime(2025, 7, 7, 4, tzinfo=UTC))
    assert await yahoo.bars(["AAPL"], "1d", *weekend) == {}


@sync
async def test_a_hung_request_times_out() -> None:
    release = threading.Event()

    def hang(request: PreparedRequest) -> tuple[int, Any]:
        release.wait(5)
        return 200, payload("chart_AAPL_1d.json")

    yahoo, _ = source([(r"/v8/finance/chart/", hang)], MID_SESSION, timeout_s=0.2)
    try:
        with pytest.raises(DataUnavailable, match="timed out"):
            await yahoo.bars(["AAPL"], "1d", *WEEK)
    finally:
        release.set()


@sync
async def test_an_unknown_interval_is_refused() -> None:
    yahoo, _ = source([], MID_SESSION)
    with pytest.raises(IntervalUnavailable):
        await yahoo.bars(["AAPL"], "5m", *WEEK)


@sync
async def test_quote_is_the_last_minute_close_before_at() -> None:
    minutes = {"AAPL": (200, payload("chart_AAPL_1m.json"))}
    at = datetime(2025, 7, 8, 19, 59, 30, tzinfo=UTC)
    yahoo, _ = source([charts(minutes)], at)
    found = await yahoo.quote(["AAPL", "GONE"], at)
    assert set(found) == {"AAPL"}
    assert found["AAPL"].price == Decimal("210.01")
    assert found["AAPL"].at == at  # the 15:59 bar is still open: stamped `at`, never later


@sync
async def test_news_in_both_shapes_filtered_and_newest_first() -> None:
    yahoo, _ = source([(r"/xhr/ncp", lambda r: (200, payload("news_AAPL.json")))], MID_SESSION)
    items = await yahoo.news(["AAPL"], *WEEK, limit=10)
    assert [item.title for item in items] == [
        "Apple faces EU deadline",
        "Apple supplier shares rise on iPhone demand",
    ]  # the untitled item and the ad are dropped
    assert items[1].published_at == datetime(2025, 7, 8, 13, 5, tzinfo=UTC)
    assert items[1].source == "yahoo:Reuters"
    assert items[1].url.startswith("https://finance.yahoo.com/news/")


@sync
async def test_news_fails_only_when_every_symbol_fails() -> None:
    yahoo, _ = source([(r"/xhr/ncp", lambda r: (500, "boom"))], MID_SESSION)
    with pytest.raises(DataUnavailable):
        await yahoo.news(["AAPL"], *WEEK, limit=10)


def info_routes(found: bool) -> list[tuple[str, Route]]:
    summary = "quoteSummary_AAPL.json" if found else "quoteSummary_not_found.json"
    quote = "quote_AAPL.json" if found else "quote_not_found.json"
    return [
        (r"quoteSummary", lambda r: (200, payload(summary))),
        (r"/v7/finance/quote", lambda r: (200, payload(quote))),
        (r"fundamentals-timeseries", lambda r: (200, payload("timeseries_empty.json"))),
    ]


@sync
async def test_fundamentals_are_stamped_with_their_fetch_time() -> None:
    yahoo, _ = source(info_routes(found=True), MID_SESSION)
    facts = await yahoo.fundamentals("AAPL", MID_SESSION)
    assert facts.fetched_at == MID_SESSION
    assert not facts.point_in_time
    assert facts.market_cap == Decimal(3136659996672)
    assert facts.trailing_pe == Decimal("32.7")
    assert facts.dividend_yield == Decimal("0.004857")  # the fraction, not percent points
    assert (facts.sector, facts.currency) == ("Technology", "USD")


@sync
async def test_fundamentals_refuse_the_past_and_unknown_symbols() -> None:
    yahoo, _ = source(info_routes(found=False), MID_SESSION)
    with pytest.raises(SymbolUnavailable):
        await yahoo.fundamentals("NOPE", MID_SESSION)
    with pytest.raises(DataUnavailable, match="live"):
        await yahoo.fundamentals("AAPL", datetime(2025, 1, 2, tzinfo=UTC))


@sync
async def test_live_fundamentals_turn_the_info_snapshot_into_a_report() -> None:
    yahoo, _ = source(info_routes(found=True), MID_SESSION)
    live = LiveFundamentals(yahoo.fundamentals, name="yfinance", currency="USD")
    start = MID_SESSION - timedelta(days=800)
    [report] = await live.reports("AAPL", start, MID_SESSION + timedelta(microseconds=1), 4)
    assert (report.symbol, report.published_at, report.currency) == ("AAPL", MID_SESSION, "USD")
    assert report.values["trailing_pe"] == Decimal("32.7")
    assert report.values["market_cap"] == Decimal(3136659996672)
    with pytest.raises(DataUnavailable, match="live"):  # a window in the past: Yahoo cannot say
        await live.reports("AAPL", start, MID_SESSION - timedelta(days=30), 4)


# AAPL's 4-for-1 split went ex on 2020-08-31; Yahoo stamps events at the session open.
SPLIT_2020 = {"AAPL": (200, payload("chart_AAPL_1d_split_2020.json"))}
DIVIDEND_2025 = {"AAPL": (200, payload("chart_AAPL_1d_dividend_2025.json"))}


@sync
async def test_a_4_for_1_split_is_read_at_its_ex_dates_session_open() -> None:
    after = datetime(2020, 9, 1, 21, 0, tzinfo=UTC)
    yahoo, _ = source([charts(SPLIT_2020)], after, universe=("AAPL", "MSFT"))
    [split] = await yahoo.actions(["AAPL"], date(2020, 8, 27), date(2020, 9, 1))
    assert (split.symbol, split.kind, split.ratio, split.cash) == (
        "AAPL",
        ActionKind.SPLIT,
        Decimal(4),
        Decimal(0),
    )
    assert (split.ex_date, split.ex_at) == (
        date(2020, 8, 31),
        datetime(2020, 8, 31, 13, 30, tzinfo=UTC),
    )
    assert (split.currency, split.source) == ("USD", "yfinance")
    # Outside the dates asked for, the same answer holds no action.
    assert await yahoo.actions(["AAPL"], date(2020, 9, 1), date(2020, 9, 1)) == []


@sync
async def test_a_cash_dividend_is_read_per_share_in_dollars() -> None:
    after = datetime(2025, 8, 12, 21, 0, tzinfo=UTC)
    yahoo, _ = source([charts(DIVIDEND_2025)], after)
    [dividend] = await yahoo.actions(["AAPL"], date(2025, 8, 7), date(2025, 8, 12))
    assert (dividend.kind, dividend.cash, dividend.ratio, dividend.ex_date) == (
        ActionKind.CASH_DIVIDEND,
        Decimal("0.26"),
        Decimal(1),
        date(2025, 8, 11),
    )
    assert dividend.ex_at == datetime(2025, 8, 11, 13, 30, tzinfo=UTC)


@sync
async def test_actions_of_a_symbol_yahoo_does_not_know_are_none() -> None:
    after = datetime(2025, 8, 12, 21, 0, tzinfo=UTC)
    yahoo, _ = source([charts(DIVIDEND_2025)], after)
    found = await yahoo.actions(["AAPL", "GONE"], date(2025, 8, 7), date(2025, 8, 12))
    assert [action.symbol for action in found] == ["AAPL"]


@sync
async def test_actions_rate_limited_or_empty_are_unavailable() -> None:
    after = datetime(2025, 8, 12, 21, 0, tzinfo=UTC)
    limited, _ = source([(r"/v8/finance/chart/", lambda r: (429, "Too Many Requests"))], after)
    with pytest.raises(RateLimited):
        await limited.actions(["AAPL"], date(2025, 8, 7), date(2025, 8, 12))
    yf.data.YfData.cache_get.cache_clear()
    empty, _ = source([charts({"AAPL": (200, {"chart": {"result": None, "error": None}})})], after)
    with pytest.raises(DataUnavailable):
        await empty.actions(["AAPL"], date(2025, 8, 7), date(2025, 8, 12))


@pytest.mark.parametrize(
    ("factor", "ratio"),
    [("4.0", Decimal(4)), ("1.5", Decimal("1.5")), ("0.3333333333333333", Decimal(1) / 3)],
)
def test_yahoo_split_factors_become_exact_ratios(factor: str, ratio: Decimal) -> None:
    assert split_ratio(Decimal(factor)) == ratio


def test_the_network_guard_refuses_a_real_connection() -> None:
    with pytest.raises(AssertionError, match="network"):
        socket.create_connection(("127.0.0.1", 9))
