"""A fake Yahoo with a history: the DJIA-20's daily bars, dividends, share counts and news over
StockBench's window, in Yahoo's recorded wire shapes, for `openbell data download`'s tests.

Every answer is one of the recorded payloads in `tests/resources/vendors/yahoo` with its numbers
replaced: a chart is `chart_AAPL_1d_dividend_2025.json` (its `meta`, `timestamp`, `events.
dividends` and `indicators.quote`/`adjclose` blocks), a share count `timeseries_shares_AAPL.json`,
the news `news_AAPL.json` (its `content` items). The numbers are synthetic: the bundled bars do
not reach back to 2025-03 (their daily files start on 2025-06-10), so each symbol's prices are a
random walk seeded by its name (`History`), from 2024-02-01 to 2025-07-31, every session of the
XNYS calendar; each member but AMZN pays a quarterly dividend (ex on the 10th session of each
quarter); each has two share counts, and one news item every fifth session, published the evening
before. yfinance runs for real on them (`FakeYahoo` routes, `serve`); `main` runs the real
`openbell` command line with this fake as its only network, for the acceptance tests' subprocess.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import tempfile
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
from requests.models import PreparedRequest

from openbell.markets.calendars import calendar_for
from openbell.markets.universes import load_universe
from openbell_testkit.yahoo import FakeYahoo, payload

FIRST = date(2024, 2, 1)
LAST = date(2025, 7, 31)
#: The members that pay no dividend.
NO_DIVIDEND = frozenset({"AMZN"})
NEWS_EVERY = 5


@dataclass(frozen=True, slots=True)
class Session:
    day: date
    opened: int  # epoch seconds of the 09:30 New York open, as Yahoo stamps a daily bar
    open: float
    high: float
    low: float
    close: float
    volume: int


class History:
    """The synthetic history of each symbol (see the module docstring), built on first use."""

    def __init__(self, symbols: tuple[str, ...]) -> None:
        self.symbols = symbols
        calendar = calendar_for("XNYS")
        self.days = [
            (day, int(calendar.session_open(day).timestamp()))
            for day in calendar.sessions_between(FIRST, LAST)
        ]
        self._sessions: dict[str, list[Session]] = {}

    def sessions(self, symbol: str) -> list[Session]:
        found = self._sessions.get(symbol)
        if found is None:
            found = self._sessions[symbol] = self._walk(symbol)
        return found

    def _walk(self, symbol: str) -> list[Session]:
        rng = random.Random(zlib.crc32(symbol.encode()))
        close = 40.0 + zlib.crc32(symbol.encode()) % 400
        out = []
        for day, opened in self.days:
            open_ = round(close * (1 + rng.gauss(0, 0.004)), 2)
            close = round(open_ * (1 + rng.gauss(0.0004, 0.014)), 2)
            high = round(max(open_, close) * (1 + abs(rng.gauss(0, 0.005))), 2)
            low = round(min(open_, close) * (1 - abs(rng.gauss(0, 0.005))), 2)
            volume = rng.randrange(1_000_000, 20_000_000)
            out.append(Session(day, opened, open_, high, low, close, volume))
        return out

    def dividends(self, symbol: str) -> list[tuple[int, float]]:
        """(ex-date's open, cash per share): the 10th session of each quarter."""
        if symbol in NO_DIVIDEND:
            return []
        sessions = self.sessions(symbol)
        out = []
        quarter = None
        count = 0
        for session in sessions:
            this = (session.day.year, (session.day.month - 1) // 3)
            count = count + 1 if this == quarter else 1
            quarter = this
            if count == 10:
                out.append((session.opened, round(session.close * 0.005, 2)))
        return out

    def shares(self, symbol: str) -> list[tuple[int, int]]:
        """(epoch seconds, shares outstanding): at the start of 2025 and of April 2025."""
        base = 500_000_000 + zlib.crc32(symbol.encode()) % 7_000_000_000
        return [
            (int(datetime(2025, 1, 1, tzinfo=UTC).timestamp()), base),
            (int(datetime(2025, 4, 1, tzinfo=UTC).timestamp()), base - base // 200),
        ]

    def news(self, symbol: str) -> list[tuple[datetime, str]]:
        """(published at, title): every fifth session, at 22:00 UTC the evening before."""
        out = []
        for index, session in enumerate(self.sessions(symbol)):
            if index % NEWS_EVERY == 0:
                published = datetime.combine(session.day - timedelta(days=1), time(22), tzinfo=UTC)
                out.append((published, f"{symbol} synthetic headline {index}"))
        return out


def chart(history: History, symbol: str, start: int, end: int) -> dict[str, Any]:
    """The recorded chart payload with `symbol`'s sessions opening in `[start, end)`."""
    document: dict[str, Any] = copy.deepcopy(payload("chart_AAPL_1d_dividend_2025.json"))
    result = document["chart"]["result"][0]
    rows = [s for s in history.sessions(symbol) if start <= s.opened < end]
    meta = result["meta"]
    meta["symbol"] = symbol
    if rows:
        meta["regularMarketTime"] = rows[-1].opened
        meta["regularMarketPrice"] = rows[-1].close
        meta["chartPreviousClose"] = rows[0].open
    result["timestamp"] = [s.opened for s in rows]
    result["indicators"]["quote"] = [
        {
            "open": [s.open for s in rows],
            "high": [s.high for s in rows],
            "low": [s.low for s in rows],
            "close": [s.close for s in rows],
            "volume": [s.volume for s in rows],
        }
    ]
    result["indicators"]["adjclose"] = [{"adjclose": [s.close for s in rows]}]
    paid = {
        str(at): {"amount": cash, "date": at}
        for at, cash in history.dividends(symbol)
        if start <= at < end
    }
    result["events"] = {"dividends": paid} if paid else {}
    if not rows:
        del result["timestamp"]
        result["indicators"] = {"quote": [{}], "adjclose": [{}]}
    return document


def shares(history: History, symbol: str, start: int, end: int) -> dict[str, Any]:
    """The recorded share-count payload with `symbol`'s counts dated in `[start, end]`."""
    document: dict[str, Any] = copy.deepcopy(payload("timeseries_shares_AAPL.json"))
    result = document["timeseries"]["result"][0]
    counts = [(at, n) for at, n in history.shares(symbol) if start <= at <= end]
    result["meta"]["symbol"] = [symbol]
    result["timestamp"] = [at for at, _ in counts]
    result["shares_out"] = [n for _, n in counts]
    return document


def news(history: History, symbol: str) -> dict[str, Any]:
    """The recorded news payload with `symbol`'s items (in the 2025 `content` shape)."""
    document: dict[str, Any] = copy.deepcopy(payload("news_AAPL.json"))
    template = document["data"]["tickerStream"]["stream"][0]
    stream = []
    for index, (published, title) in enumerate(history.news(symbol)):
        item = copy.deepcopy(template)
        item["id"] = item["content"]["id"] = f"{symbol.lower()}-{index:04d}"
        stamp = published.strftime("%Y-%m-%dT%H:%M:%SZ")
        item["content"].update(title=title, pubDate=stamp, displayTime=stamp)
        stream.append(item)
    document["data"]["tickerStream"]["stream"] = stream
    return document


def routes(history: History) -> list[tuple[str, Any]]:
    """The fake's routes over `history` (a symbol it does not hold gets Yahoo's not-found)."""

    def query(request: PreparedRequest) -> tuple[str, dict[str, list[str]]]:
        url = urlparse(request.url or "")
        return url.path.rsplit("/", 1)[-1], parse_qs(url.query)

    def chart_route(request: PreparedRequest) -> tuple[int, Any]:
        ticker, found = query(request)
        if ticker not in history.symbols:
            return 200, payload("chart_not_found.json")
        if "period1" not in found:  # yfinance's time-zone lookup (range=1d)
            last = history.sessions(ticker)[-1].opened
            return 200, chart(history, ticker, last, last + 1)
        return 200, chart(history, ticker, int(found["period1"][0]), int(found["period2"][0]))

    def shares_route(request: PreparedRequest) -> tuple[int, Any]:
        ticker, found = query(request)
        if ticker not in history.symbols:
            return 200, payload("timeseries_empty.json")
        return 200, shares(history, ticker, int(found["period1"][0]), int(found["period2"][0]))

    def news_route(request: PreparedRequest) -> tuple[int, Any]:
        body = json.loads(request.body or b"{}")
        (ticker,) = body["serviceConfig"]["s"]
        return 200, news(history, ticker)

    return [
        (r"/v8/finance/chart/", chart_route),
        (r"/fundamentals-timeseries/", shares_route),
        (r"/xhr/ncp", news_route),
    ]


def djia20() -> History:
    """The history of StockBench's 20 DJIA members."""
    return History(load_universe("djia20").symbols)


def session(history: History) -> tuple[requests.Session, FakeYahoo]:
    """A `requests` session answering from `history`, and its transport (which records URLs)."""
    adapter = FakeYahoo(routes(history))
    found = requests.Session()
    found.mount("https://", adapter)
    return found, adapter


def refuse_the_network() -> None:
    """Fail any real connection of this process (Python sockets, DNS, curl_cffi)."""
    import socket

    import curl_cffi.requests

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(f"the fake Yahoo's process tried to reach the network: {args!r}")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    curl_cffi.requests.Session.request = refuse  # type: ignore[method-assign,assignment]


#: The environment variable naming a file the fake appends each URL it answers to.
URL_LOG_ENV = "OPENBELL_FAKE_YAHOO_LOG"


def main(argv: list[str] | None = None) -> int:
    """`openbell ARGS` with the DJIA-20 fake as Yahoo and no other network: the adapter's
    session (which it makes itself when given none) is this fake's. With `$OPENBELL_FAKE_YAHOO_
    LOG` set, the URLs it answered are appended to that file when the command ends."""
    import yfinance as yf
    from curl_cffi import requests as curl_requests

    from openbell.ops.cli.app import main as openbell

    history = djia20()
    yf.set_tz_cache_location(tempfile.mkdtemp(prefix="fake-yahoo-"))
    refuse_the_network()
    made, adapter = session(history)
    # The adapter's own session (it makes one when given none) is the fake's.
    curl_requests.Session = lambda **_: made  # type: ignore[misc,assignment]
    try:
        return openbell(sys.argv[1:] if argv is None else argv)
    finally:
        log = os.environ.get(URL_LOG_ENV)
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.writelines(f"{url}\n" for url in adapter.urls)


#: Shares outstanding as `History.shares` gives them, for tests that check market caps.
def shares_on(history: History, symbol: str, day: date) -> Decimal | None:
    """The count dated last before `day`."""
    known = [n for at, n in history.shares(symbol) if datetime.fromtimestamp(at, UTC).date() < day]
    return Decimal(known[-1]) if known else None


if __name__ == "__main__":
    raise SystemExit(main())
