"""`AkshareSource`: the live A-share `MarketDataSource` over akshare (Eastmoney, CSIndex).

This module owns how openbell calls akshare. Eastmoney bans clients that call too often, so every
call waits its turn at one `RateLimiter` (at least `min_interval_s` apart) and its answer is kept
in a `Memo` for `memo_ttl_s` seconds, so that the reads of one slot cost one request per symbol.
Every call runs in a worker thread under a deadline (several akshare functions have no timeout).
Prices are unadjusted (`adjust=""`: forward-adjusted history is rewritten at every ex-date). Quotes
come from `stock_bid_ask_em`, one request per symbol (the whole-market spot list takes a minute);
corporate actions from Eastmoney's dividend table (`stock_fhps_detail_em`), one request per symbol.
akshare raises raw errors: network errors, timeouts and non-JSON bodies (a 429 or a ban page)
raise `DataUnavailable`; a symbol whose payload has no data (Eastmoney's `data: null`) is left
out, unless every symbol of the read fails that way (a format change), which raises too. An SSE
index (the CSI 300 `000300.SH`, the SSE 50 `000016.SH`) has daily bars from Eastmoney's index
klines (`stock_zh_index_daily_em`, secid `1.<code>`: its bare code would name an SZSE stock) and no
hourly bars or quotes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final, TypeVar

import akshare
import pandas as pd
import requests
from pandas.errors import Pandas4Warning

from openbell.markets.adapters.akshare.parse import (
    SHANGHAI,
    index_vendor_symbol,
    is_index,
    parse_actions,
    parse_daily,
    parse_hourly,
    parse_index_daily,
    parse_last_price,
    parse_members,
    parse_news,
    vendor_code,
)
from openbell.markets.adapters.failures import EMPTY
from openbell.markets.adapters.vendor_calls import (
    Memo,
    Monotonic,
    Now,
    RateLimiter,
    Sleep,
    bars_within,
    call_blocking,
    check_bars_request,
    check_live,
    newest_news,
)
from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.corporate_actions import CorporateAction, in_apply_order
from openbell.markets.domain import Bar, NewsItem, Quote
from openbell.markets.errors import DataUnavailable, RateLimited, SymbolUnavailable
from openbell.markets.sources import SourceIdentity, SymbolFilter, check_symbols
from openbell.markets.universes import Universe

# akshare 1.19 uses pandas APIs that pandas 3 deprecates (`inplace=`, a format with integer
# dates); the results are right and the warnings are not ours to fix (pyproject filters the same
# ones for the tests).
warnings.filterwarnings(
    "ignore", message=r"The inplace keyword", category=Pandas4Warning, module=r"akshare\."
)
warnings.filterwarnings(
    "ignore",
    message=r"Parsing integer or float values with a format",
    category=Pandas4Warning,
    module=r"akshare\.",
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
INTERVALS: Final = ("1h", "1d")
SSE50: Final = "000016"
CSI300: Final = "000300"
_HOUR: Final = timedelta(hours=1)


class _NoData(DataUnavailable):
    """akshare's parser failed on the payload of one symbol (Eastmoney's `data: null`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, cause=EMPTY)


def _is_rate_limit(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 429


class AkshareSource(SourceIdentity):
    """China A-shares from Eastmoney and CSIndex through akshare. Every datetime is aware UTC.

    `now` is the daemon clock's `now` (bars not ended by then are dropped; quotes are live and
    refuse an `at` well before it); `universe` is what `news(None, ...)` reads; `monotonic` and
    `sleep` drive the rate limiter and the memo (fakes in tests, never the wall clock).
    """

    def __init__(
        self,
        *,
        now: Now,
        universe: Sequence[str] = (),
        calendar: TradingCalendar | None = None,
        timeout_s: float = 20.0,
        min_interval_s: float = 1.0,
        memo_ttl_s: float = 60.0,
        monotonic: Monotonic = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__("akshare", "cn", INTERVALS)
        self._now = now
        self._universe = check_symbols(universe)
        self._calendar = calendar or calendar_for("XSHG")
        self._timeout_s = timeout_s
        self._limiter = RateLimiter(min_interval_s, monotonic=monotonic, sleep=sleep)
        self._memo: Memo[pd.DataFrame] = Memo(memo_ttl_s, monotonic=monotonic)

    async def _call(self, function: str, **kwargs: Any) -> pd.DataFrame:
        """`akshare.<function>(**kwargs)`, memoised, rate-limited, under the deadline."""
        key = (function, tuple(sorted(kwargs.items())))
        found = self._memo.get(key)
        if found is not None:
            return found
        await self._limiter.wait()
        vendor = getattr(akshare, function)
        what = f"akshare {function}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        try:
            frame = await call_blocking(
                functools.partial(vendor, **kwargs), timeout_s=self._timeout_s, what=what
            )
        except DataUnavailable:
            raise
        except (requests.RequestException, OSError) as exc:
            if _is_rate_limit(exc):
                raise RateLimited(f"{what}: Eastmoney rate limit") from exc
            # A ban shows up as RemoteDisconnected / ConnectionError; retry later, slowly.
            raise DataUnavailable(f"{what} failed: {exc!r}") from exc
        except json.JSONDecodeError as exc:  # a 429, a ban or an error page is not JSON
            raise DataUnavailable(f"{what}: the vendor did not answer JSON ({exc})") from exc
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise _NoData(f"{what}: unexpected payload ({exc!r})") from exc
        if not isinstance(frame, pd.DataFrame):
            raise _NoData(f"{what} returned {type(frame).__name__}, not a DataFrame")
        self._memo.put(key, frame)
        return frame

    async def _each(
        self, symbols: Sequence[str], read: Callable[[str], Awaitable[T]], what: str
    ) -> dict[str, T]:
        """`read` for each symbol; one without data is left out, but not all of them."""
        out: dict[str, T] = {}
        failures: list[str] = []
        first = ""
        for symbol in symbols:
            try:
                out[symbol] = await read(symbol)
            except _NoData as exc:
                failures.append(symbol)
                first = first or str(exc)
        if symbols and len(failures) == len(symbols):
            raise DataUnavailable(
                f"akshare {what}: no data for any symbol ({first})", cause=EMPTY, symbols=failures
            )
        if failures:
            logger.warning(
                "vendor_symbol_missing",
                extra={"source": self.name, "symbols": failures, "error": first},
            )
        return out

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        """Finished bars starting in `[start_at, end_at)`, by symbol, oldest first; an SSE index
        (`000300.SH`, `000016.SH`) has daily bars (`stock_zh_index_daily_em`) and no hourly."""
        check_bars_request(self.name, INTERVALS, interval, start_at, end_at)
        wanted = check_symbols(symbols)
        # An index has daily bars only (Eastmoney's minute klines of an index are not read).
        served = [s for s in wanted if interval == "1d" or not is_index(s)]
        if end_at <= start_at or not served:
            return {}
        first = start_at.astimezone(SHANGHAI)
        last = end_at.astimezone(SHANGHAI)

        async def read(symbol: str) -> tuple[Bar, ...]:
            code = vendor_code(symbol)
            if is_index(symbol):
                frame = await self._call(
                    "stock_zh_index_daily_em",
                    symbol=index_vendor_symbol(symbol),
                    start_date=first.strftime("%Y%m%d"),
                    end_date=last.strftime("%Y%m%d"),
                )
                return parse_index_daily(frame, symbol, self._calendar, self._now())
            if interval == "1d":
                frame = await self._call(
                    "stock_zh_a_hist",
                    symbol=code,
                    period="daily",
                    start_date=first.strftime("%Y%m%d"),
                    end_date=last.strftime("%Y%m%d"),
                    adjust="",
                    timeout=self._timeout_s,
                )
                return parse_daily(frame, symbol, self._calendar, self._now())
            frame = await self._call(
                "stock_zh_a_hist_min_em",
                symbol=code,
                start_date=first.strftime("%Y-%m-%d %H:%M:%S"),
                end_date=(last + _HOUR).strftime("%Y-%m-%d %H:%M:%S"),
                period="60",
                adjust="",
            )
            return parse_hourly(frame, symbol, self._calendar, self._now())

        found = await self._each(served, read, f"{interval} bars")
        return bars_within(found, start_at, end_at)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        """The last trade price of each symbol now, stamped `min(at, now)` (live only)."""
        stamp = check_live("akshare quotes", at, self._now())
        stocks = [symbol for symbol in check_symbols(symbols) if not is_index(symbol)]

        async def read(symbol: str) -> Quote | None:
            frame = await self._call("stock_bid_ask_em", symbol=vendor_code(symbol))
            price = parse_last_price(frame)
            return None if price is None else Quote(symbol=symbol, price=price, at=stamp)

        found = await self._each(stocks, read, "quotes")
        return {symbol: quote for symbol, quote in found.items() if quote is not None}

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Eastmoney news about `symbols` (None: the universe) published in `[start_at, end_at)`.

        Eastmoney's search returns the latest 10 items per code, found by keyword: an item may
        mention the company without being about it.
        """
        wanted = [s for s in (self._universe if symbols is None else check_symbols(symbols))]

        async def read(symbol: str) -> list[NewsItem]:
            frame = await self._call("stock_news_em", symbol=vendor_code(symbol))
            return parse_news(frame, symbol)

        found = await self._each(wanted, read, "news")
        items = (item for batch in found.values() for item in batch)
        return newest_news(items, start_at, end_at, limit)

    async def actions(
        self, symbols: Sequence[str], first: date, last: date
    ) -> Sequence[CorporateAction]:
        """Cash dividends and bonus issues of `symbols` going ex on a Shanghai date in `[first,
        last]`, from Eastmoney's dividend table (`stock_fhps_detail_em`), one request per code (it
        answers the code's whole history). Cash is pre-tax. Indexes have none.
        """
        stocks = [symbol for symbol in check_symbols(symbols) if not is_index(symbol)]
        if not stocks or last < first:
            return []

        async def read(symbol: str) -> list[CorporateAction]:
            frame = await self._call("stock_fhps_detail_em", symbol=vendor_code(symbol))
            return parse_actions(frame, symbol, self._calendar, source=self.name)

        found = await self._each(stocks, read, "corporate actions")
        return in_apply_order(
            action
            for actions in found.values()
            for action in actions
            if first <= action.ex_date <= last
        )

    async def index_members(
        self, index: str = SSE50, *, name: str = "sse50", benchmark: str | None = None
    ) -> Universe:
        """The current members of a CSIndex index (default SSE 50; `CSI300` for the CSI 300),
        dated by CSIndex, with `benchmark` as the universe's benchmark when given.

        CSIndex publishes today's list only: using it for a past date is survivorship bias.
        """
        try:
            frame = await self._call("index_stock_cons_csindex", symbol=index)
        except _NoData as exc:
            raise SymbolUnavailable(
                f"CSIndex has no member list for {index}", symbol=index
            ) from exc
        found = parse_members(frame, name, benchmark)
        if found is None:
            raise SymbolUnavailable(f"CSIndex has no member list for {index}", symbol=index)
        return found
