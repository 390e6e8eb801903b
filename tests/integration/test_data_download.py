"""`markets.importers.download` through the real yfinance adapter, yfinance itself running on
recorded-shape Yahoo payloads (`openbell_testkit.yahoo_history`) with the network refused: what
lands in the folder, progress, resuming (a second run asks Yahoo nothing; a wider window asks only
for the days missing), and a symbol whose requests fail, named and fetched by the next run."""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs, urlparse
from zoneinfo import ZoneInfo

import pytest
import yfinance as yf
from requests.models import PreparedRequest

from openbell.markets.adapters.yfinance import YahooSource
from openbell.markets.importers.download import DownloadRequest, download
from openbell.markets.importers.download_folder import DownloadFolder, read_research
from openbell.markets.importers.research_files import read_reports
from openbell_testkit.offline import refuse_network
from openbell_testkit.yahoo_history import History, routes, session

NOW = datetime(2025, 7, 10, 12, tzinfo=UTC)
NEW_YORK = ZoneInfo("America/New_York")
SYMBOLS = ("AAPL", "AMZN", "MSFT")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch, with_curl=True)


@pytest.fixture(autouse=True)
def _isolated_yfinance(tmp_path: Path) -> None:
    yf.set_tz_cache_location(str(tmp_path / "yf-cache"))
    yf.data.YfData.cache_get.cache_clear()


def run(
    folder: Path, first: date, last: date, history: History, *, broken: str | None = None
) -> tuple[object, list[str], list[tuple[int, int, str]]]:
    """One download of `SYMBOLS`; the report, the URLs Yahoo was asked and the progress calls.
    `broken`: a ticker whose chart requests get a 503. Each run is a process of its own to
    yfinance: its in-process caches (answers by URL, time zones) start empty."""
    yf.data.YfData.cache_get.cache_clear()
    yf.set_tz_cache_location(tempfile.mkdtemp(prefix="yf-cache-"))
    made, adapter = session(history)
    if broken is not None:

        def down(request: PreparedRequest) -> tuple[int, object]:
            return 503, "<html>Service Unavailable</html>"

        adapter.routes.insert(2, (rf"/v8/finance/chart/{broken}\?", down))
    yahoo = YahooSource(now=lambda: NOW, session=made, threads=False)
    request = DownloadRequest(
        market="us", symbols=SYMBOLS, interval="1d", first=first, last=last, now=NOW
    )
    calls: list[tuple[int, int, str]] = []
    report = asyncio.run(
        download(
            yahoo,
            request,
            DownloadFolder(folder),
            progress=lambda done, total, what: calls.append((done, total, what)),
        )
    )
    return report, adapter.urls, calls


def chart_starts(urls: list[str]) -> list[date]:
    """The first day of each dated chart request."""
    found = []
    for url in urls:
        query = parse_qs(urlparse(url).query)
        if "/v8/finance/chart/" in url and "period1" in query:
            found.append(datetime.fromtimestamp(int(query["period1"][0]), NEW_YORK).date())
    return found


def test_a_download_fills_the_folder_and_a_second_asks_yahoo_nothing(tmp_path: Path) -> None:
    history = History(SYMBOLS)
    report, urls, calls = run(tmp_path, date(2025, 3, 3), date(2025, 6, 30), history)
    assert report.symbols_done == 3  # type: ignore[attr-defined]
    assert report.failed == {}  # type: ignore[attr-defined]
    folder = DownloadFolder(tmp_path)
    aapl = folder.bars("us", "1d", "AAPL")
    # the window's sessions and the 53 weeks before it (from 2024-02-26)
    assert aapl[0].start_at.astimezone(NEW_YORK).date() == date(2024, 2, 26)
    assert aapl[-1].start_at.astimezone(NEW_YORK).date() == date(2025, 6, 30)
    expected = [
        s for s in history.sessions("AAPL") if date(2024, 2, 26) <= s.day <= date(2025, 6, 30)
    ]
    assert [bar.close for bar in aapl] == [Decimal(str(s.close)) for s in expected]
    # dividends of the payers, none for AMZN
    actions = folder.actions()
    assert {row["symbol"] for row in actions} == {"AAPL", "MSFT"}
    assert all(row["kind"] == "cash_dividend" for row in actions)
    # StockBench's fundamentals for each of the window's 83 sessions, published at its open
    reports = read_reports(tmp_path / "fundamentals" / "AAPL.jsonl")
    assert len(reports) == 83
    first = reports[0]
    assert first.published_at == datetime(2025, 3, 3, 14, 30, tzinfo=UTC)
    assert set(first.values) == {
        "fifty_two_week_high",
        "fifty_two_week_low",
        "last_dividend",
        "dividend_yield",
        "market_cap",
    }
    amzn = read_reports(tmp_path / "fundamentals" / "AMZN.jsonl")[0]
    assert set(amzn.values) == {"fifty_two_week_high", "fifty_two_week_low", "market_cap"}
    news, all_reports = read_research(tmp_path)
    assert len(all_reports) == 3 * 83
    assert {item.symbol for item in news} == set(SYMBOLS)
    assert all(date(2025, 3, 3) <= item.published_at.date() <= date(2025, 6, 30) for item in news)
    # progress: every piece of every symbol, then done
    assert calls[0] == (0, 15, "AAPL bars")
    assert calls[-1] == (15, 15, "done")
    assert [done for done, _, _ in calls] == list(range(16))

    again, urls, _ = run(tmp_path, date(2025, 3, 3), date(2025, 6, 30), history)
    assert urls == []
    assert again.asked == dict.fromkeys(again.asked, 0)  # type: ignore[attr-defined]
    assert again.present["bars"] == 3  # type: ignore[attr-defined]


def test_a_wider_window_asks_only_for_the_days_missing(tmp_path: Path) -> None:
    history = History(SYMBOLS)
    run(tmp_path, date(2025, 3, 3), date(2025, 4, 30), history)
    _, urls, _ = run(tmp_path, date(2025, 3, 3), date(2025, 6, 30), history)
    assert chart_starts(urls)  # it asked for bars...
    assert min(chart_starts(urls)) == date(2025, 5, 1)  # ...of May and June only
    reports = read_reports(tmp_path / "fundamentals" / "MSFT.jsonl")
    assert len(reports) == 83
    manifest = json.loads((tmp_path / "download.json").read_text(encoding="utf-8"))
    assert manifest["fetched"]["bars:1d:MSFT"] == [["2024-02-26", "2025-06-30"]]


def test_a_failing_symbol_is_named_and_the_next_run_fetches_it(tmp_path: Path) -> None:
    history = History(SYMBOLS)
    report, _, _ = run(tmp_path, date(2025, 3, 3), date(2025, 6, 30), history, broken="MSFT")
    assert report.symbols_done == 2  # type: ignore[attr-defined]
    # bars and corporate actions both come from Yahoo's chart
    assert set(report.failed) == {"bars MSFT", "actions MSFT"}  # type: ignore[attr-defined]
    assert "http_503" in report.failed["bars MSFT"]  # type: ignore[attr-defined]
    assert not (tmp_path / "fundamentals" / "MSFT.jsonl").exists()  # waits for its bars
    again, urls, _ = run(tmp_path, date(2025, 3, 3), date(2025, 6, 30), history)
    assert again.failed == {}  # type: ignore[attr-defined]
    assert {urlparse(u).path.rsplit("/", 1)[-1] for u in urls if "/chart/" in u} == {"MSFT"}
    assert len(read_reports(tmp_path / "fundamentals" / "MSFT.jsonl")) == 83


def test_the_fake_answers_only_its_routes() -> None:
    # The fake has no answer for a page it does not know: yfinance's 404, never the network.
    assert [pattern for pattern, _ in routes(History(SYMBOLS))] == [
        r"/v8/finance/chart/",
        r"/fundamentals-timeseries/",
        r"/xhr/ncp",
    ]


def test_a_crypto_download_through_ccxt_fetches_the_bars_it_serves(tmp_path: Path) -> None:
    """ccxt's binance on the recorded klines (`binance/klines_session.json`): bars only, as ccxt
    serves no corporate actions, shares or news, and no fundamentals are rebuilt."""
    import ccxt.async_support as ccxt_async

    from openbell.markets.adapters.ccxt import CcxtSource

    resources = Path(__file__).parents[1] / "resources" / "vendors" / "binance"
    info = json.loads((resources / "exchangeInfo.json").read_text(encoding="utf-8"))
    klines = json.loads((resources / "klines_session.json").read_text(encoding="utf-8"))
    now = datetime(2025, 11, 4, 12, tzinfo=UTC)
    asked: list[str] = []

    async def fetch(url: str, method: str = "GET", headers: object = None, body: object = None):  # type: ignore[no-untyped-def]
        asked.append(url)
        if "/api/v3/exchangeInfo" in url:
            return info
        query = parse_qs(urlparse(url).query)
        rows = klines[query["interval"][0]][query["symbol"][0]]
        since = int(query.get("startTime", ["0"])[0])
        return [row for row in rows if row[0] >= since][: int(query["limit"][0])]

    async def scenario(first: date, last: date) -> object:
        exchange = ccxt_async.binance(
            {
                "enableRateLimit": False,
                "options": {"fetchMarkets": {"types": ["spot"]}, "fetchCurrencies": False},
            }
        )
        exchange.fetch = fetch
        source = CcxtSource(exchange, now=lambda: now)
        request = DownloadRequest(
            market="crypto",
            symbols=("BTC/USDT", "ETH/USDT"),
            interval="1d",
            first=first,
            last=last,
            now=now,
        )
        try:
            return await download(source, request, DownloadFolder(tmp_path))
        finally:
            await source.close()

    report = asyncio.run(scenario(date(2025, 10, 28), date(2025, 11, 2)))
    assert report.symbols_done == 2  # type: ignore[attr-defined]
    folder = DownloadFolder(tmp_path)
    btc = folder.bars("crypto", "1d", "BTC/USDT")
    assert (tmp_path / "crypto-1d-BTC-USDT.parquet").exists()
    # every recorded daily candle from the look-back's start to the window's end
    assert [bar.start_at.date() for bar in btc] == [date(2025, 10, d) for d in range(27, 32)] + [
        date(2025, 11, 1),
        date(2025, 11, 2),
    ]
    assert folder.actions() == []
    assert not (tmp_path / "fundamentals").exists()
    assert report.asked["news"] == 2  # type: ignore[attr-defined]  # asked, and none served
    asked.clear()
    asyncio.run(scenario(date(2025, 10, 28), date(2025, 11, 2)))
    assert [url for url in asked if "/klines" in url] == []
