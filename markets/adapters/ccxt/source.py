"""`CcxtSource`: the live crypto `MarketDataSource` over one ccxt (async) exchange.

This module owns how openbell calls ccxt: one `ccxt.async_support` exchange instance per source
(ccxt throttles per instance), markets loaded once (`load_markets`, spot only on binance) and read
for each instrument's amount step, price tick and minimum cost; OHLCV paged by `since` in
milliseconds until the window is covered, with the candle still open at `now` dropped; quotes from
one `fetch_tickers` call. A symbol the exchange no longer lists is left out of batch reads;
ccxt's exceptions are translated by `parse.translate_error`, with the HTTP status of the answer
they came from (noted through ccxt's `on_rest_response` hook, per call). `close()` releases the
exchange's HTTP session and must be awaited at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

import ccxt.async_support as ccxt_async

from openbell.markets.adapters.ccxt.parse import (
    parse_instrument,
    parse_ohlcv,
    parse_ticker,
    to_ms,
    translate_error,
)
from openbell.markets.adapters.vendor_calls import Now, check_live
from openbell.markets.domain import Bar, Instrument, NewsItem, Quote, check_utc
from openbell.markets.errors import (
    ConfigError,
    DataUnavailable,
    IntervalUnavailable,
    SymbolUnavailable,
)
from openbell.markets.sources import INTERVAL_LENGTHS, SourceIdentity, SymbolFilter, check_symbols

logger = logging.getLogger(__name__)

T = TypeVar("T")
INTERVALS: Final = ("1h", "1d")
_MAX_PAGES: Final = 100
#: The HTTP statuses the exchange answered during the current `_call` (one list per call).
_STATUSES: ContextVar[list[int] | None] = ContextVar("ccxt_statuses", default=None)


class CcxtSource(SourceIdentity):
    """Crypto spot data from one exchange through ccxt's asyncio API. Datetimes are aware UTC.

    Build it with `create("binance", now=...)`, or pass an exchange instance (tests pass one whose
    `fetch` serves recorded payloads). `now` is the daemon clock's `now`; `timeout_s` bounds each
    exchange call on top of ccxt's own `timeout`; `page_limit` is the candles asked per request.
    """

    def __init__(
        self, exchange: Any, *, now: Now, timeout_s: float = 30.0, page_limit: int = 1000
    ) -> None:
        super().__init__(f"ccxt:{exchange.id}", "crypto", INTERVALS)
        self._exchange = exchange
        self._now = now
        self._timeout_s = timeout_s
        self._page_limit = page_limit
        self._markets_loaded = False
        respond = exchange.on_rest_response

        def note_status(code: Any, *args: Any) -> Any:
            # ccxt's hook on every answer, in the task that made the request: a vendor error
            # mapped from the body alone (binance's codes) still gets the status it came with.
            statuses = _STATUSES.get()
            if statuses is not None and isinstance(code, int):
                statuses.append(code)
            return respond(code, *args)

        exchange.on_rest_response = note_status

    @classmethod
    def create(
        cls, exchange_id: str = "binance", *, now: Now, config: Mapping[str, Any] | None = None
    ) -> CcxtSource:
        """A source over a new `ccxt.async_support.<exchange_id>` (spot markets only)."""
        factory = getattr(ccxt_async, exchange_id, None)
        if exchange_id not in ccxt_async.exchanges or factory is None:
            raise ConfigError(f"ccxt has no exchange {exchange_id!r}")
        settings: dict[str, Any] = {
            "enableRateLimit": True,
            "options": {"fetchMarkets": {"types": ["spot"]}, "fetchCurrencies": False},
        }
        settings.update(config or {})
        return cls(factory(settings), now=now)

    async def _call(self, call: Awaitable[T], what: str) -> T:
        statuses: list[int] = []
        token = _STATUSES.set(statuses)
        try:
            return await asyncio.wait_for(call, timeout=self._timeout_s)
        except TimeoutError as exc:
            raise DataUnavailable(f"{what} timed out after {self._timeout_s:g} s") from exc
        except ccxt_async.BaseError as exc:
            status = statuses[-1] if statuses and statuses[-1] >= 400 else None
            raise translate_error(exc, what, status=status) from exc
        finally:
            _STATUSES.reset(token)

    async def _markets(self) -> Mapping[str, Any]:
        if not self._markets_loaded:
            await self._call(self._exchange.load_markets(), f"{self.name} load_markets")
            self._markets_loaded = True
        markets: Mapping[str, Any] = self._exchange.markets or {}
        return markets

    async def _listed(self, symbols: Sequence[str]) -> list[str]:
        markets = await self._markets()
        listed = [symbol for symbol in symbols if symbol in markets]
        for symbol in sorted(set(symbols) - set(listed)):
            logger.warning("vendor_symbol_missing", extra={"source": self.name, "symbol": symbol})
        return listed

    async def instrument(self, symbol: str) -> Instrument:
        """The trading facts of `symbol` from the exchange's markets (step, tick, minimum cost)."""
        markets = await self._markets()
        found = markets.get(symbol)
        if found is None:
            raise SymbolUnavailable(f"{self.name} does not list {symbol}", symbol=symbol)
        return parse_instrument(found, int(self._exchange.precisionMode))

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        """Closed candles starting in `[start_at, end_at)`, by symbol, oldest first."""
        if interval not in INTERVALS or interval not in (self._exchange.timeframes or {}):
            raise IntervalUnavailable(
                f"{self.name} serves {', '.join(INTERVALS)}, not {interval}", interval=interval
            )
        check_utc("start_at", start_at)
        check_utc("end_at", end_at)
        length = INTERVAL_LENGTHS[interval]
        out: dict[str, tuple[Bar, ...]] = {}
        if end_at <= start_at:
            return out
        for symbol in await self._listed(check_symbols(symbols)):
            try:
                found = await self._candles(symbol, interval, length, start_at, end_at)
            except SymbolUnavailable:
                logger.warning(
                    "vendor_symbol_missing", extra={"source": self.name, "symbol": symbol}
                )
                continue
            if found:
                out[symbol] = found
        return out

    async def _candles(
        self, symbol: str, interval: str, length: timedelta, start_at: datetime, end_at: datetime
    ) -> tuple[Bar, ...]:
        now = self._now()
        since = to_ms(start_at)
        stop = to_ms(min(end_at, now))
        collected: dict[datetime, Bar] = {}
        for _ in range(_MAX_PAGES):
            rows = await self._call(
                self._exchange.fetch_ohlcv(symbol, interval, since=since, limit=self._page_limit),
                f"{self.name} fetch_ohlcv {symbol} {interval}",
            )
            opens = [int(row[0]) for row in rows or () if row and isinstance(row[0], int | float)]
            for bar in parse_ohlcv(rows or (), symbol, length, now):
                if start_at <= bar.start_at < end_at:
                    collected.setdefault(bar.start_at, bar)
            if not opens or max(opens) < since:
                break
            since = max(opens) + _ms(length)
            if since >= stop:
                break
        return tuple(collected[start] for start in sorted(collected))

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        """The last price of each listed symbol from one `fetch_tickers` call (live only)."""
        stamp = check_live(f"{self.name} quotes", at, self._now())
        listed = await self._listed(check_symbols(symbols))
        if not listed:
            return {}
        tickers = await self._call(
            self._exchange.fetch_tickers(listed), f"{self.name} fetch_tickers"
        )
        out: dict[str, Quote] = {}
        for symbol in listed:
            ticker = (tickers or {}).get(symbol)
            if isinstance(ticker, Mapping):
                quote = parse_ticker(ticker, symbol, stamp)
                if quote is not None:
                    out[symbol] = quote
        return out

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        """Exchanges publish no news through ccxt: always empty."""
        return ()

    async def close(self) -> None:
        """Close the exchange's HTTP session (ccxt warns about an unclosed one)."""
        await self._exchange.close()


def _ms(length: timedelta) -> int:
    """A duration in whole milliseconds."""
    return length // timedelta(milliseconds=1)
