"""Retrying market-data reads within a slot's grace window: a decorator over any source.

This module owns `RetryingSource`, the live daemon's answer to a flaky vendor. It wraps a
`MarketDataSource` and retries a read whose error `error_policy.action_for` says to retry (a
`TransientError`: a timeout, a 429, a 5xx) with exponential backoff, but only while the next
attempt still starts inside the grace window of the slot asked about (`at + grace`, on the daemon's
clock); then it re-raises, and the cycle runner skips the slot with reason `data_unavailable`.
Anything else (an interval or symbol the source does not serve, `NotServed`) propagates at once.
Each failed attempt is one short `vendor_read_failed` event naming the source, the read and its
interval, how many symbols failed (`symbols`) with one of them (`example`), the cause
(`adapters.failures`: dns, connect, timeout, http_<status>, empty, ...), the first line of the
error (at most `MAX_MESSAGE_CHARS`) and the attempt: at warning while a retry follows, at error
when the read is given up (at warning, with `given_up`, when the daemon stops: a stop ends the
retries at once, so a slot whose vendor is away finishes its cycles `skipped` instead of holding
the stop for its grace). (A market of 300 symbols made each line 2,000+ characters when it listed
them all.) The cycle runner itself stays as replay uses it: the retry lives here, around the
source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final, TypeVar

import structlog

from openbell.daemon.clock import Clock
from openbell.daemon.error_policy import Action, Stage, action_for
from openbell.markets.adapters.failures import failure_cause
from openbell.markets.domain import Bar, NewsItem, Quote
from openbell.markets.errors import DataUnavailable
from openbell.markets.sources import ForwardingSource, MarketDataSource, SymbolFilter

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

log = structlog.stdlib.get_logger(__name__)

#: The first backoff, in seconds; each retry doubles it up to `MAX_BACKOFF_S`.
FIRST_BACKOFF_S: Final = 1.0
MAX_BACKOFF_S: Final = 60.0
#: How often (real seconds) a backoff looks whether the daemon stops.
STOP_POLL_S: Final = 0.25
#: A logged error message is cut to its first line and this many characters.
MAX_MESSAGE_CHARS: Final = 160


class RetryingSource(ForwardingSource):
    """`source`, with each read retried on a transient error while the slot's grace lasts."""

    def __init__(
        self,
        source: MarketDataSource,
        *,
        clock: Clock,
        grace: timedelta,
        sleep: Sleep = asyncio.sleep,
        first_backoff_s: float = FIRST_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        max_attempts: int = 8,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        super().__init__(source)
        self._clock = clock
        self._grace = grace
        self._sleep = sleep
        self._first_backoff_s = first_backoff_s
        self._max_backoff_s = max_backoff_s
        self._max_attempts = max_attempts
        self._stopping = stopping
        self.retries = 0  # how many reads were tried again, for logs and tests

    @property
    def inner(self) -> MarketDataSource:
        """The wrapped source."""
        return self._source

    async def _retry(
        self,
        read: Callable[[], Awaitable[T]],
        at: datetime,
        what: str,
        symbols: Sequence[str] | None,
        **about: str,
    ) -> T:
        deadline = at + self._grace
        backoff_s = self._first_backoff_s
        attempt = 1
        while True:
            try:
                return await read()
            except Exception as exc:
                if action_for(Stage.READ, exc) is not Action.RETRY:
                    raise
                # The backoff is real seconds; the deadline is on the daemon's clock, which runs
                # faster under a test's fake clock: compare where the clock will be after it.
                speed = getattr(self._clock, "speed", 1.0)
                after = self._clock.now() + timedelta(seconds=backoff_s * speed)
                stopping = self._stopping()
                retry = attempt < self._max_attempts and after < deadline and not stopping
                log.log(
                    logging.WARNING if retry or stopping else logging.ERROR,
                    "vendor_read_failed",
                    source=self.name,
                    read=what,
                    **about,
                    **_symbols_field(_failed_symbols(exc) or symbols or ()),
                    cause=failure_cause(exc),
                    attempt=attempt,
                    retry_in_s=backoff_s if retry else None,
                    error_class=type(exc).__name__,
                    error_message=short_message(exc),
                    **({"given_up": "daemon_stopping"} if stopping else {}),
                )
                if not retry:
                    raise
                self.retries += 1
                await self._wait(backoff_s)
                backoff_s = min(backoff_s * 2, self._max_backoff_s)
                attempt += 1

    async def _wait(self, backoff_s: float) -> None:
        """Sleep `backoff_s` before the next try, in steps of at most `STOP_POLL_S`, ending early
        when the daemon stops (the next try then gives up at once)."""
        left_s = backoff_s
        while left_s > 0 and not self._stopping():
            step_s = min(left_s, STOP_POLL_S)
            await self._sleep(step_s)
            left_s -= step_s

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        return await self._retry(
            lambda: self._source.bars(symbols, interval, start_at, end_at),
            end_at,
            "bars",
            symbols,
            interval=interval,
        )

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        return await self._retry(lambda: self._source.quote(symbols, at), at, "quote", symbols)

    async def news(
        self, symbols: SymbolFilter, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[NewsItem]:
        return await self._retry(
            lambda: self._source.news(symbols, start_at, end_at, limit), end_at, "news", symbols
        )


def short_message(exc: BaseException, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first line of `exc`'s message, cut to `limit` characters (`...` marks a cut)."""
    text = str(exc).strip().partition("\n")[0] or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _symbols_field(symbols: Sequence[str]) -> dict[str, object]:
    """`symbols`: how many; `example`: the first of them (None: the read named none)."""
    return {"symbols": len(symbols), "example": symbols[0] if symbols else None}


def _failed_symbols(exc: Exception) -> tuple[str, ...]:
    """The symbols a read failed for, when its error names them (else the whole read failed)."""
    return exc.symbols if isinstance(exc, DataUnavailable) else ()
