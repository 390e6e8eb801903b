"""`YahooSource`: the live US-equities `MarketDataSource` over yfinance, plus fundamentals and
corporate actions.

This module owns how openbell calls yfinance: one `yf.download` for the whole universe per
(interval, window) instead of one per symbol, kept for a few seconds so that every read of one slot
shares it; raw (unadjusted, `auto_adjust=False`) prices, since adjusted history is rewritten after
every dividend and is not point-in-time; quotes from the last 1-minute bar before `at`; news from a
fresh `Ticker` per read (a reused `Ticker` never refreshes its news); fundamentals from
`Ticker.info`, which is a snapshot of today and is stamped with its `fetched_at`, and shares
outstanding as Yahoo dates them (`Ticker.get_shares_full`, the history behind a point-in-time
market capitalisation); splits and
cash dividends from the `Dividends` and `Stock Splits` columns of a daily download. `yf.download`
never raises: it logs each failed ticker and returns NaN columns or an empty frame, so the log
lines are read to tell a rate limit (`RateLimited`) from a symbol Yahoo does not know (left out,
one `vendor_symbol_missing` event) and to name why requests failed (`adapters.failures`: dns,
connect, timeout, an HTTP status). An empty frame for a window that holds a session is
`DataUnavailable` with that cause (`empty` when yfinance named none); symbols whose requests failed
while others answered are left out with one `vendor_symbols_failed` event. Every call runs in a
worker thread under a deadline, one at a time (yfinance keeps process-wide state).
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Final
from zoneinfo import ZoneInfo

import pandas as pd
import yfinance as yf
from pandas.errors import Pandas4Warning

from openbell.markets.adapters.failures import EMPTY, RATE_LIMITED, failure_cause, most_common
from openbell.markets.adapters.vendor_calls import (
    Memo,
    Monotonic,
    Now,
    bars_within,
    call_blocking,
    check_bars_request,
    check_live,
    newest_news,
)
from openbell.markets.adapters.yfinance.parse import (
    DownloadFailures,
    parse_actions,
    parse_download,
    parse_info,
    parse_last_prices,
    parse_news,
    parse_shares,
    tickers_with_rows,
    yahoo_ticker,
)
from openbell.markets.adapters.yfinance.watch import YahooWatch, describe
from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.corporate_actions import CorporateAction
from openbell.markets.domain import Bar, NewsItem, Quote, check_utc
from openbell.markets.errors import DataUnavailable, RateLimited, SymbolUnavailable
from openbell.markets.fundamentals import Fundamentals
from openbell.markets.sources import SourceIdentity, SymbolFilter, check_symbols

# yfinance 1.7 passes `inplace=` to pandas 3, which warns on every download; the data are right
# and the warning is not ours to fix (pyproject filters the same one for the tests).
warnings.filterwarnings(
    "ignore", message=r"The inplace keyword", category=Pandas4Warning, module=r"yfinance\."
)

logger = logging.getLogger(__name__)

INTERVALS: Final = ("1h", "1d")
NEW_YORK: Final = ZoneInfo("America/New_York")
_QUOTE_DAYS: Final = 5  # 1-minute bars looked back for a quote: covers a long weekend


class YahooSource(SourceIdentity):
    """US equities from Yahoo Finance through yfinance. Every datetime is aware UTC.

    `universe` is downloaded in full whenever any of it is asked for; `now` is the daemon clock's
    `now` (bars not ended by then are dropped); `session` is a `requests` or `curl_cffi` session
    (None: a new Chrome-impersonating curl_cffi one, as yfinance's own), injected for proxies and
    for tests; it is watched for failed requests (`watch.YahooWatch`). yfinance keeps one session
    for the whole process, so two sources with different sessions must not run at once.
    """

    def __init__(
        self,
        *,
        now: Now,
        universe: Sequence[str] = (),
        session: Any = None,
        calendar: TradingCalendar | None = None,
        timeout_s: float = 30.0,
        memo_ttl_s: float = 60.0,
        news_count: int = 20,
        threads: bool = True,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        super().__init__("yfinance", "us", INTERVALS)
        self._now = now
        self._universe = check_symbols(universe)
        self._watch = YahooWatch(session)
        self._session = self._watch.session
        self._calendar = calendar or calendar_for("XNYS")
        self._timeout_s = timeout_s
        self._news_count = news_count
        self._threads = threads
        # (interval, first, last) -> (symbols downloaded, their finished bars)
        self._memo: Memo[tuple[frozenset[str], dict[str, tuple[Bar, ...]]]] = Memo(
            memo_ttl_s, monotonic=monotonic
        )
        self._lock = asyncio.Lock()

    def _tickers(self, symbols: Sequence[str]) -> dict[str, str]:
        return {symbol: yahoo_ticker(symbol) for symbol in (*self._universe, *symbols)}

    async def _call(self, function: Callable[[], Any], what: str) -> Any:
        async with self._lock:
            return await call_blocking(function, timeout_s=self._timeout_s, what=what)

    async def _download(
        self,
        tickers: Mapping[str, str],
        interval: str,
        first: date,
        last: date,
        *,
        actions: bool = False,
    ) -> tuple[pd.DataFrame | None, DownloadFailures]:
        """One `yf.download` of every ticker over local dates `[first, last]` (with `actions`:
        its `Dividends` and `Stock Splits` columns too).

        Past the deadline, the cause yfinance had logged by then (a resolver that answers slowly
        or not at all is `dns`, not a timeout of Yahoo's) is the error's cause.
        """
        wanted = sorted(set(tickers.values()))
        failures = DownloadFailures()

        def fetch() -> pd.DataFrame | None:
            with self._watch.during(failures):
                frame: pd.DataFrame | None = yf.download(
                    wanted,
                    start=first.isoformat(),
                    end=(last + timedelta(days=1)).isoformat(),
                    interval=interval,
                    auto_adjust=False,
                    actions=actions,
                    prepost=False,
                    progress=False,
                    threads=self._threads,
                    group_by="column",
                    multi_level_index=True,
                    session=self._session,
                    timeout=self._timeout_s,
                )
            return frame

        what = f"yfinance download of {len(wanted)} tickers"
        try:
            frame = await self._call(fetch, what)
        except DataUnavailable as exc:  # past the deadline: say what yfinance had met by then
            cause = failures.cause
            if cause is None:
                raise
            raise DataUnavailable(
                f"{what} failed ({cause}): {failures.first(cause)}; gave up after "
                f"{self._timeout_s:g} s",
                cause=cause,
            ) from exc
        return frame, failures

    def _check(
        self,
        frame: pd.DataFrame | None,
        failures: DownloadFailures,
        asked: Mapping[str, str],
        has_session: bool,
    ) -> None:
        limited = [symbol for symbol, ticker in asked.items() if ticker in failures.rate_limited]
        if limited:
            raise RateLimited(
                f"Yahoo rate-limited the download of {limited}",
                cause=RATE_LIMITED,
                symbols=limited,
            )
        with_rows = tickers_with_rows(frame)
        if has_session and not with_rows:
            # No ticker at all has a row although the window holds a session: Yahoo failed
            # (throttled answers look like "possibly delisted" too), not every symbol delisted.
            cause = failures.cause or EMPTY
            said = failures.first(cause) if cause != EMPTY else "an empty frame"
            raise DataUnavailable(
                f"yfinance returned no rows for a window with sessions ({cause}: {said})",
                cause=cause,
            )
        # A request yfinance retried with success (a stale crumb's 401) is no failure.
        failed = {
            s: failures.failed[t]
            for s, t in asked.items()
            if t in failures.failed and t not in with_rows
        }
        if failed:
            logger.warning(
                "vendor_symbols_failed",
                extra={
                    "source": self.name,
                    "cause": most_common(list(failed.values())),
                    "symbols": sorted(failed),
                },
            )
        missing = sorted(s for s, t in asked.items() if t in failures.missing)
        if missing:
            logger.warning("vendor_symbol_missing", extra={"source": self.name, "symbols": missing})

    def _has_session(self, start_at: datetime, end_at: datetime) -> bool:
        """Whether some session overlaps `[start_at, end_at)` (then an empty frame is a failure)."""
        first = start_at.astimezone(NEW_YORK).date()
        last = end_at.astimezone(NEW_YORK).date()
        for day in self._calendar.sessions_between(first, last):
            session = self._calendar.session(day)
            if start_at < session.close_at and session.open_at < end_at:
                return True
        return False

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        """Finished bars starting in `[start_at, end_at)`, by symbol, oldest first."""
        check_bars_request(self.name, INTERVALS, interval, start_at, end_at)
        asked = {symbol: yahoo_ticker(symbol) for symbol in check_symbols(symbols)}
        if not asked or end_at <= start_at:
            return {}
        first = start_at.astimezone(NEW_YORK).date()
        last = end_at.astimezone(NEW_YORK).date()
        key = (interval, first, last)
        memo = self._memo.get(key)
        if memo is None or not set(asked) <= memo[0]:
            tickers = self._tickers(tuple(asked))
            frame, failures = await self._download(tickers, interval, first, last)
            self._check(frame, failures, asked, self._has_session(start_at, end_at))
            parsed = parse_download(frame, tickers, interval, self._calendar, self._now())
            memo = (frozenset(tickers), parsed)
            self._memo.put(key, memo)
        parsed = memo[1]
        return bars_within({symbol: parsed.get(symbol, ()) for symbol in asked}, start_at, end_at)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        """The close of the last 1-minute bar starting before `at`, stamped `min(its end, at)`."""
        check_utc("at", at)
        asked = {symbol: yahoo_ticker(symbol) for symbol in check_symbols(symbols)}
        if not asked:
            return {}
        local = at.astimezone(NEW_YORK).date()
        first = local - timedelta(days=_QUOTE_DAYS)
        tickers = self._tickers(tuple(asked))
        frame, failures = await self._download(tickers, "1m", first, local)
        session_open = self._has_session(at - timedelta(days=_QUOTE_DAYS), at)
        self._check(frame, failures, asked, session_open)
        return parse_last_prices(frame, asked, at)

    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]:
        """Splits and cash dividends of `symbols` going ex on a New York date in `[first, last]`.

        One `yf.download(actions=True)` of raw daily bars over those dates (the
        `CorporateActionSource` contract). Yahoo reports every dividend in today's shares: one paid
        before a later split comes back divided by its ratio, so an action is right when fetched
        by its ex-date, which is when the daemon fetches it.
        """
        asked = {symbol: yahoo_ticker(symbol) for symbol in check_symbols(symbols)}
        if not asked or last < first:
            return []
        frame, failures = await self._download(asked, "1d", first, last, actions=True)
        self._check(frame, failures, asked, bool(self._calendar.sessions_between(first, last)))
        found = parse_actions(frame, asked, self._calendar, source=self.name)
        return [action for action in found if first <= action.ex_date <= last]

    async def shares_outstanding(
        self, symbol: str, first: date, last: date
    ) -> list[tuple[date, Decimal]]:
        """The shares outstanding of `symbol` Yahoo dates in the New York days `[first, last]`,
        oldest first (none when it has none). A rate limit is `RateLimited`; a failed request
        `DataUnavailable`."""
        ticker = yahoo_ticker(symbol)

        def fetch() -> Any:
            with self._watch.during(DownloadFailures()) as failures:
                series = yf.Ticker(ticker, session=self._session).get_shares_full(
                    start=first.isoformat(), end=(last + timedelta(days=1)).isoformat()
                )
            if series is None and failures.messages:
                raise DataUnavailable(
                    f"yfinance shares of {ticker}: {failures.messages[-1].strip()}",
                    cause=failures.cause,
                )
            return series

        try:
            series = await self._call(fetch, f"yfinance shares of {ticker}")
        except DataUnavailable:
            raise
        except yf.exceptions.YFRateLimitError as exc:
            raise RateLimited(f"Yahoo rate-limited the shares of {ticker}") from exc
        except Exception as exc:  # raw HTTP and JSON errors of the timeseries endpoint
            raise DataUnavailable(f"yfinance shares of {ticker} failed: {describe(exc)}") from exc
        return [(day, count) for day, count in parse_shares(series) if first <= day <= last]

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Yahoo news about `symbols` (None: the universe) published in `[start_at, end_at)`."""
        wanted = self._universe if symbols is None else check_symbols(symbols)
        items: list[NewsItem] = []
        failed: dict[str, str] = {}  # symbol -> cause
        first_error = ""
        for symbol in wanted:
            ticker = yahoo_ticker(symbol)

            def fetch(ticker: str = ticker) -> Any:
                with self._watch.during(DownloadFailures()) as failures:
                    raw = yf.Ticker(ticker, session=self._session).get_news(count=self._news_count)
                if failures.messages and not raw:  # yfinance logs a failed request, returns []
                    raise DataUnavailable(
                        f"yfinance news of {ticker}: {failures.messages[-1].strip()}",
                        cause=failures.cause,
                    )
                return raw

            try:
                raw = await self._call(fetch, f"yfinance news of {ticker}")
            except Exception as exc:  # noqa: BLE001  (yfinance raises raw HTTP and JSON errors)
                failed[symbol] = failure_cause(exc)
                first_error = first_error or describe(exc)
                continue
            items.extend(parse_news(raw or (), symbol))
        if failed:
            cause = most_common(list(failed.values()))
            if len(failed) == len(wanted):
                raise DataUnavailable(
                    f"yfinance news failed for every symbol asked ({cause}): {first_error}",
                    cause=cause,
                )
            logger.warning(
                "vendor_symbols_failed",
                extra={
                    "source": self.name,
                    "read": "news",
                    "cause": cause,
                    "symbols": sorted(failed),
                },
            )
        return newest_news(items, start_at, end_at, limit)

    async def fundamentals(self, symbol: str, at: datetime) -> Fundamentals:
        """`Ticker.info` of `symbol` now, stamped `fetched_at=min(at, now)`.

        Not point-in-time: Yahoo reports today's figures only, so an `at` well before `now`
        raises `DataUnavailable`, and a symbol Yahoo does not know raises `SymbolUnavailable`.
        """
        fetched_at = check_live("yfinance fundamentals", at, self._now())
        ticker = yahoo_ticker(symbol)

        def fetch() -> Any:
            return yf.Ticker(ticker, session=self._session).info

        try:
            info = await self._call(fetch, f"yfinance info of {ticker}")
        except DataUnavailable:
            raise
        except yf.exceptions.YFRateLimitError as exc:
            raise RateLimited(f"Yahoo rate-limited the info of {ticker}") from exc
        except Exception as exc:  # raw HTTP and JSON errors of the quoteSummary endpoint
            raise DataUnavailable(f"yfinance info of {ticker} failed: {exc!r}") from exc
        found = parse_info(info if isinstance(info, Mapping) else {}, symbol, fetched_at)
        if found is None:
            raise SymbolUnavailable(f"Yahoo knows no symbol {ticker}", symbol=symbol)
        return found
