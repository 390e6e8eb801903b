"""The akshare adapter against recorded Eastmoney and CSIndex payloads, through akshare's parsers.

The HTTP functions akshare calls (`requests.get`, and `curl_cffi.requests.get` for news) are
replaced by a router over recorded payloads, so akshare's own URL building and frame assembly run
for real. Any real connection attempt fails the test.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import curl_cffi.requests
import pytest
import requests

from openbell.markets.adapters.akshare import AkshareSource
from openbell.markets.adapters.failures import failure_cause
from openbell.markets.corporate_actions import ActionKind
from openbell.markets.errors import DataUnavailable, SymbolUnavailable
from openbell_testkit.offline import refuse_network, sync

PAYLOADS = Path(__file__).parents[1] / "resources" / "vendors" / "eastmoney"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch, with_curl=True)


@dataclass
class Recorded:
    """A response with what akshare reads of one: `json()`, `text`, `content`, `status_code`."""

    status_code: int = 200
    text: str = ""
    content: bytes = b""

    def json(self) -> Any:
        return json.loads(self.text)  # a 429 page is not JSON: JSONDecodeError, as for real


def recorded(name: str, status: int = 200) -> Recorded:
    path = PAYLOADS / name
    if path.suffix == ".xlsx":
        return Recorded(status_code=status, content=path.read_bytes())
    text = path.read_text(encoding="utf-8")
    return Recorded(status_code=status, text=text, content=text.encode())


@dataclass
class Eastmoney:
    """Routes akshare's GETs by URL and query to recorded payloads; counts the calls."""

    routes: dict[tuple[str, str], Callable[[], Recorded]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def get(self, url: str, params: dict[str, Any] | None = None, **kwargs: Any) -> Recorded:
        params = params or {}
        query = params.get("secid", params.get("param", params.get("filter", "")))
        key = (url.split("/")[-1] or url, str(query))
        self.calls.append(key)
        for (path, query), answer in self.routes.items():
            if path in url and query in key[1]:
                return answer()
        raise AssertionError(f"no recorded payload for {url} {params}")


@pytest.fixture
def eastmoney(monkeypatch: pytest.MonkeyPatch) -> Eastmoney:
    fake = Eastmoney()
    monkeypatch.setattr(requests, "get", fake.get)
    monkeypatch.setattr(curl_cffi.requests, "get", fake.get)
    return fake


def make_source(now: datetime, **options: Any) -> AkshareSource:
    async def no_wait(seconds: float) -> None:
        return None

    options.setdefault("min_interval_s", 0.0)
    return AkshareSource(now=lambda: now, sleep=no_wait, **options)


DAILY_URL = ("kline/get", "1.600519")
WEEK = (datetime(2025, 7, 6, tzinfo=UTC), datetime(2025, 7, 11, tzinfo=UTC))
# 2025-07-10 10:00 Shanghai: the 2025-07-10 daily bar is in progress.
JULY_10 = datetime(2025, 7, 10, 2, 0, tzinfo=UTC)


@sync
async def test_daily_bars_are_sessions_in_shares(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_600519_daily.json")
    found = await make_source(JULY_10).bars(["600519.SH"], "1d", *WEEK)
    bars = found["600519.SH"]
    # 07-07 once (it is repeated), 07-08 is a NaN row, 07-10 is in progress.
    assert [bar.start_at for bar in bars] == [
        datetime(2025, 7, 7, 1, 30, tzinfo=UTC),
        datetime(2025, 7, 9, 1, 30, tzinfo=UTC),
    ]
    assert bars[0].end_at == datetime(2025, 7, 7, 7, 0, tzinfo=UTC)
    assert (bars[0].open, bars[0].high, bars[0].close) == (
        Decimal("1418.00"),
        Decimal("1428.80"),
        Decimal("1421.50"),
    )
    assert bars[0].volume == Decimal(2401800)  # 24018 lots of 100


@sync
async def test_hourly_bars_are_end_labelled(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_600519_60.json")
    morning = datetime(2025, 7, 9, 2, 0, tzinfo=UTC)  # 10:00 Shanghai: 09:30-10:30 is open
    bars = (await make_source(morning).bars(["600519.SH"], "1h", *WEEK))["600519.SH"]
    spans = [(bar.start_at.hour, bar.end_at.hour) for bar in bars]
    assert spans == [(1, 2), (2, 3), (5, 6), (6, 7)]  # UTC: 09:30-10:30 ... 14:00-15:00 Shanghai
    assert bars[0].start_at.minute == 30
    assert bars[2].start_at == datetime(2025, 7, 8, 5, 0, tzinfo=UTC)  # 13:00, after lunch


@sync
async def test_calls_are_memoised_and_rate_limited(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_600519_daily.json")
    eastmoney.routes[("kline/get", "0.000001")] = lambda: recorded("kline_600519_daily.json")
    waits: list[float] = []
    clock = [100.0]

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    source = AkshareSource(
        now=lambda: JULY_10, min_interval_s=1.5, monotonic=lambda: clock[0], sleep=sleep
    )
    await source.bars(["600519.SH", "000001.SZ"], "1d", *WEEK)
    await source.bars(["600519.SH"], "1d", *WEEK)
    assert len(eastmoney.calls) == 2  # the repeated read was served from the memo
    assert waits == [1.5]  # the second symbol waited its turn
    clock[0] += 61.0
    await source.bars(["600519.SH"], "1d", *WEEK)
    assert len(eastmoney.calls) == 3  # the memo expired


@sync
async def test_a_symbol_that_disappeared_is_left_out(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_600519_daily.json")
    eastmoney.routes[("kline/get", "0.000002")] = lambda: recorded("kline_not_found.json")
    eastmoney.routes[("stock/get", "1.600519")] = lambda: recorded("stock_get_600519.json")
    eastmoney.routes[("stock/get", "0.000002")] = lambda: recorded("stock_get_not_found.json")
    source = make_source(JULY_10)
    found = await source.bars(["600519.SH", "000002.SZ"], "1d", *WEEK)
    assert set(found) == {"600519.SH"}
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_600519_60.json")
    hourly = await source.bars(["600519.SH", "000002.SZ"], "1h", *WEEK)
    assert set(hourly) == {"600519.SH"}  # akshare's minute parser fails on `data: null`
    quotes = await source.quote(["600519.SH", "000002.SZ"], JULY_10)
    assert set(quotes) == {"600519.SH"}


@sync
async def test_an_empty_frame_is_no_bars(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: recorded("kline_not_found.json")
    assert await make_source(JULY_10).bars(["600519.SH"], "1d", *WEEK) == {}


@sync
async def test_a_429_is_unavailable(eastmoney: Eastmoney) -> None:
    eastmoney.routes[DAILY_URL] = lambda: Recorded(status_code=429, text="Too Many Requests")
    with pytest.raises(DataUnavailable):
        await make_source(JULY_10).bars(["600519.SH"], "1d", *WEEK)


@sync
async def test_a_ban_is_unavailable(eastmoney: Eastmoney) -> None:
    def ban() -> Recorded:
        raise requests.ConnectionError("Remote end closed connection without response")

    eastmoney.routes[DAILY_URL] = ban
    with pytest.raises(DataUnavailable, match="failed"):
        await make_source(JULY_10).bars(["600519.SH"], "1d", *WEEK)


@sync
async def test_an_unresolvable_eastmoney_is_a_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def unresolvable(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", unresolvable)  # akshare's real requests call
    with pytest.raises(DataUnavailable) as raised:
        await make_source(JULY_10).bars(["600519.SH"], "1d", *WEEK)
    assert failure_cause(raised.value) == "dns"


@sync
async def test_no_data_for_any_symbol_is_an_empty_answer(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("kline/get", "0.000002")] = lambda: recorded("kline_not_found.json")
    with pytest.raises(DataUnavailable) as raised:  # akshare's minute parser fails on `data: null`
        await make_source(JULY_10).bars(["000002.SZ"], "1h", *WEEK)
    assert failure_cause(raised.value) == "empty"
    assert raised.value.symbols == ("000002.SZ",)


@sync
async def test_a_hung_call_times_out(eastmoney: Eastmoney) -> None:
    release = threading.Event()

    def hang() -> Recorded:
        release.wait(5)
        return recorded("kline_600519_daily.json")

    eastmoney.routes[DAILY_URL] = hang
    try:
        with pytest.raises(DataUnavailable, match="timed out"):
            await make_source(JULY_10, timeout_s=0.1).bars(["600519.SH"], "1d", *WEEK)
    finally:
        release.set()


@sync
async def test_quotes_are_live_only(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("stock/get", "1.600519")] = lambda: recorded("stock_get_600519.json")
    source = make_source(JULY_10)
    quotes = await source.quote(["600519.SH", "000016.SH"], JULY_10)
    assert set(quotes) == {"600519.SH"}  # the index is not served (its code is an SZSE stock)
    assert quotes["600519.SH"].price == Decimal("1432.0")
    assert quotes["600519.SH"].at == JULY_10
    with pytest.raises(DataUnavailable, match="live"):
        await source.quote(["600519.SH"], datetime(2025, 7, 1, tzinfo=UTC))


@sync
async def test_news_in_beijing_time(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("jsonp", "600519")] = lambda: recorded("news_600519.jsonp")
    source = make_source(JULY_10, universe=("600519.SH",))
    items = await source.news(None, *WEEK, limit=10)
    assert [item.title for item in items] == [
        "白酒板块早盘走强 贵州茅台涨近1%",
        "贵州茅台：上半年经营数据公告",  # noqa: RUF001  (Eastmoney's title, verbatim)
    ]
    assert items[1].published_at == datetime(2025, 7, 8, 11, 42, 10, tzinfo=UTC)
    assert items[1].source == "eastmoney:证券时报"
    assert items[1].url == "http://finance.eastmoney.com/a/202507083452911111.html"


@sync
async def test_sse50_members(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("000016cons.xls", "")] = lambda: recorded("000016cons.xlsx")
    members = await make_source(JULY_10).index_members()
    assert members.symbols == ("600519.SH", "601318.SH", "688981.SH")
    assert members.as_of.isoformat() == "2025-06-30"
    assert members.instrument("600519.SH").name == "贵州茅台"


@sync
async def test_csi300_index_daily_bars(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("kline/get", "1.000300")] = lambda: recorded("kline_000300_index_daily.json")
    source = make_source(JULY_10)
    bars = (await source.bars(["000300.SH"], "1d", *WEEK))["000300.SH"]
    # 07-07 once (it is repeated); 07-10 is in progress
    assert [bar.start_at for bar in bars] == [
        datetime(2025, 7, d, 1, 30, tzinfo=UTC) for d in (7, 8, 9)
    ]
    assert bars[1].end_at == datetime(2025, 7, 8, 7, 0, tzinfo=UTC)
    assert (bars[1].open, bars[1].high, bars[1].low, bars[1].close) == (
        Decimal("3965.50"),
        Decimal("4000.31"),
        Decimal("3963.20"),
        Decimal("3998.46"),
    )
    assert bars[1].volume == Decimal(12993050100)  # lots of 100
    assert eastmoney.calls == [("get", "1.000300")]  # the SSE index, not SZSE's 000300
    # no hourly bars of an index, and no request for them
    assert await source.bars(["000300.SH"], "1h", *WEEK) == {}
    assert len(eastmoney.calls) == 1


@sync
async def test_csi300_members(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("000300cons.xls", "")] = lambda: recorded("000300cons.xlsx")
    members = await make_source(JULY_10).index_members(
        "000300", name="csi300", benchmark="000300.SH"
    )
    assert members.name == "csi300"
    assert members.symbols == ("600519.SH", "000001.SZ", "300750.SZ", "688981.SH")
    assert members.as_of.isoformat() == "2025-11-28"
    assert members.benchmark == "000300.SH"
    assert members.instrument("300750.SZ").name == "宁德时代"


@sync
async def test_members_of_an_unknown_index(eastmoney: Eastmoney) -> None:
    eastmoney.routes[("999999cons.xls", "")] = lambda: Recorded(status_code=404, content=b"")
    with pytest.raises(SymbolUnavailable):
        await make_source(JULY_10).index_members("999999")


MOUTAI_BONUS = ("data/v1/get", '"600519"')  # RPT_SHAREBONUS_DET, filtered by code


@sync
async def test_dividends_and_bonus_shares_per_share_from_per_ten(eastmoney: Eastmoney) -> None:
    eastmoney.routes[MOUTAI_BONUS] = lambda: recorded("sharebonus_600519.json")
    source = make_source(JULY_10)
    found = await source.actions(["600519.SH"], date(2015, 1, 1), date(2025, 12, 31))
    assert [(a.ex_date, a.kind, a.cash, a.ratio) for a in found] == [
        # 2014 final: 10 送 1 股 派 43.74 元 -> 4.374 per share, then 1.1 shares per share
        (date(2015, 7, 17), ActionKind.CASH_DIVIDEND, Decimal("4.374"), Decimal(1)),
        (date(2015, 7, 17), ActionKind.SPLIT, Decimal(0), Decimal("1.1")),
        (date(2024, 12, 20), ActionKind.CASH_DIVIDEND, Decimal("23.882"), Decimal(1)),
        (date(2025, 6, 26), ActionKind.CASH_DIVIDEND, Decimal("27.673"), Decimal(1)),
    ]  # the 2025 interim plan has no ex-date yet: not an action
    assert found[-1].ex_at == datetime(2025, 6, 26, 1, 30, tzinfo=UTC)
    assert {(a.currency, a.source) for a in found} == {("CNY", "akshare")}
    assert [
        a.ex_date for a in await source.actions(["600519.SH"], date(2025, 1, 1), date(2025, 6, 30))
    ] == [date(2025, 6, 26)]


@sync
async def test_actions_of_a_code_without_data_are_none_unless_all_fail(
    eastmoney: Eastmoney,
) -> None:
    eastmoney.routes[MOUTAI_BONUS] = lambda: recorded("sharebonus_600519.json")
    eastmoney.routes[("data/v1/get", '"000002"')] = lambda: recorded("sharebonus_not_found.json")
    source = make_source(JULY_10)
    found = await source.actions(
        ["600519.SH", "000002.SZ", "000016.SH"], date(2025, 1, 1), date(2025, 12, 31)
    )
    assert {a.symbol for a in found} == {"600519.SH"}
    with pytest.raises(DataUnavailable):
        await source.actions(["000002.SZ"], date(2025, 1, 1), date(2025, 12, 31))
    eastmoney.routes[MOUTAI_BONUS] = lambda: Recorded(status_code=429, text="Too Many Requests")
    with pytest.raises(DataUnavailable):
        await make_source(JULY_10).actions(["600519.SH"], date(2025, 1, 1), date(2025, 12, 31))


def test_the_network_guard_refuses_a_real_connection() -> None:
    with pytest.raises(AssertionError, match="network"):
        socket.create_connection(("127.0.0.1", 9))
