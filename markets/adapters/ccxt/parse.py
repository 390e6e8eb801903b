"""Parsing ccxt's unified shapes (OHLCV rows, tickers, markets) and errors into openbell's.

This module owns what ccxt 4.5 returns and raises, as pure functions. An OHLCV row is
`[open time in UTC ms, open, high, low, close, volume]` with float values; it becomes
`[start, start + interval)`. A row with a None or NaN, a repeated open time (the first is kept), a
candle still open at `now` or values a `Bar` refuses is dropped. A market's `precision` is a tick
or step size under `TICK_SIZE` (almost every exchange) and a digit count under `DECIMAL_PLACES`.
`translate_error` maps ccxt's exception tree onto openbell's: retry later (network, rate limit,
exchange down), a symbol the exchange no longer lists, or an operator problem (credentials, an
unsupported feature); a retry-later error carries the HTTP status of the answer it came from,
else the cause found in the exception chain (`adapters.failures`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

import ccxt.async_support as ccxt_async
from ccxt.base.decimal_to_precision import DECIMAL_PLACES, TICK_SIZE

from openbell.markets.adapters import failures
from openbell.markets.adapters.vendor_rows import decimal, finished_bars, make_bar
from openbell.markets.domain import CURRENCY_PLACES, Bar, Instrument, Quote
from openbell.markets.errors import (
    ConfigError,
    DataUnavailable,
    OpenbellError,
    RateLimited,
    SymbolUnavailable,
)

logger = logging.getLogger(__name__)

_STATUS_MESSAGE: Final = re.compile(r"^\S+ [A-Z]+ \S+ (\d{3}) ")

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def to_ms(at: datetime) -> int:
    """An aware datetime as whole milliseconds since the Unix epoch (ccxt's `since`)."""
    return (at - _EPOCH) // _MILLISECOND


def from_ms(ms: int) -> datetime:
    """Milliseconds since the Unix epoch as an aware UTC datetime."""
    return _EPOCH + ms * _MILLISECOND


def _candle_span(row: Any, length: timedelta) -> tuple[datetime, datetime] | None:
    if not isinstance(row, list | tuple) or len(row) < 6 or not isinstance(row[0], int | float):
        return None
    start_at = from_ms(int(row[0]))
    return start_at, start_at + length


def parse_ohlcv(rows: Iterable[Any], symbol: str, length: timedelta, now: datetime) -> list[Bar]:
    """Closed candles of `symbol` from `fetch_ohlcv` rows, oldest first."""

    def build(start_at: datetime, end_at: datetime, row: Any) -> Bar | None:
        numbers = [decimal(value) for value in row[1:6]]
        return make_bar(symbol, start_at, end_at, numbers, logger=logger, event="ccxt_bar_dropped")

    candles = ((_candle_span(row, length), row) for row in rows)
    return list(finished_bars(candles, now, build))


def parse_ticker(ticker: Mapping[str, Any], symbol: str, at: datetime) -> Quote | None:
    """A unified ticker's `last` price, stamped with its time capped at `at`; None if no price."""
    price = decimal(ticker.get("last"))
    if price is None or price <= 0:
        return None
    stamp = ticker.get("timestamp")
    known_at = from_ms(int(stamp)) if isinstance(stamp, int | float) and stamp > 0 else at
    return Quote(symbol=symbol, price=price, at=min(known_at, at))


def _size(value: Any, mode: int) -> Decimal | None:
    number = decimal(value)
    if number is None or number <= 0:
        return None
    if mode == TICK_SIZE:
        return number
    if mode == DECIMAL_PLACES:
        return Decimal(1).scaleb(-int(number))
    return None  # SIGNIFICANT_DIGITS has no fixed step: the market's default applies


def parse_instrument(market: Mapping[str, Any], precision_mode: int, name: str = "") -> Instrument:
    """A ccxt market as an `Instrument` with its amount step, price tick and minimum cost."""
    symbol = str(market["symbol"])
    currency = str(market.get("quote") or "")
    if currency not in CURRENCY_PLACES:
        raise ConfigError(
            f"{symbol} is quoted in {currency!r}; openbell keeps cash in {sorted(CURRENCY_PLACES)}"
        )
    precision = market.get("precision") or {}
    limits = market.get("limits") or {}
    cost = limits.get("cost") or {}
    minimum = decimal(cost.get("min"))
    return Instrument(
        symbol=symbol,
        market="crypto",
        currency=currency,
        name=name,
        quantity_step=_size(precision.get("amount"), precision_mode),
        price_tick=_size(precision.get("price"), precision_mode),
        min_notional=minimum if minimum is not None and minimum >= 0 else None,
    )


def http_status(exc: BaseException) -> int | None:
    """The status of the answer a ccxt error came from, when its message says: ccxt writes
    `"<exchange> <METHOD> <url> <status> <reason> <body>"` for an error status it maps itself."""
    found = _STATUS_MESSAGE.match(str(exc))
    return int(found.group(1)) if found else None


def translate_error(exc: BaseException, what: str, *, status: int | None = None) -> OpenbellError:
    """The openbell error for a ccxt exception (raise it `from exc`); `status` is the HTTP status
    of the answer it came from, when the caller saw it (else read off the message)."""
    message = f"{what}: {type(exc).__name__}: {exc}"
    status = status if status is not None else http_status(exc)
    cause = failures.http_cause(status) if status is not None else None
    if isinstance(exc, ccxt_async.RateLimitExceeded | ccxt_async.DDoSProtection):
        return RateLimited(message, cause=cause)
    if isinstance(exc, ccxt_async.BadSymbol):
        return SymbolUnavailable(message)
    if isinstance(
        exc,
        ccxt_async.AuthenticationError | ccxt_async.InvalidProxySettings | ccxt_async.NotSupported,
    ):
        return ConfigError(message)
    # NetworkError (ExchangeNotAvailable, RequestTimeout, OnMaintenance), BadResponse and any
    # other ExchangeError: the exchange could not answer now.
    return DataUnavailable(message, cause=cause)
