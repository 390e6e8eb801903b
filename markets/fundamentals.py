"""Company fundamentals: vendors' snapshots, published reports, and the port the tool reads.

This module owns `Fundamentals`, what a vendor reports about a symbol when asked (yfinance's
`Ticker.info` has no history, so the only honest stamp is `fetched_at`); `FundamentalsReport`, one
published report of one symbol (its period, when it was published, its figures as exact decimals);
the `FundamentalsSource` port that the `get_fundamentals` tool reads; `RecordedFundamentals`, the
in-memory source of recorded reports that replays and tests use; and `LiveFundamentals`, which
turns a live vendor's snapshots into reports published at their fetch time.

A report is observable only once `published_at <= now` (DESIGN §2): a source answers time ranges
and the tool filters again, so a source's mistake cannot leak. A source whose figures are not as
published at each report's `published_at` (restated figures, a snapshot fetched later than the
time it is served for) says so with `point_in_time = False`, and the tool refuses to serve it.
A live snapshot stamped with its fetch time is point-in-time in that sense: it is served for that
time or later, never earlier (the adapters refuse a question about the past).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Protocol

from openbell.markets.domain import check_currency, check_utc

_NUMBERS = (
    "market_cap",
    "shares_outstanding",
    "trailing_pe",
    "forward_pe",
    "price_to_book",
    "beta",
    "dividend_yield",
    "fifty_two_week_high",
    "fifty_two_week_low",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fundamentals:
    """What `source` reported about `symbol` when asked at `fetched_at`. None: not reported.

    `market_cap` is in `currency`; `dividend_yield` is a fraction (0.0047 is 0.47 %); the ratios
    may be negative (a loss-making company has a negative P/E).
    """

    symbol: str
    fetched_at: datetime
    source: str
    point_in_time: bool = False
    currency: str | None = None
    name: str = ""
    sector: str = ""
    industry: str = ""
    market_cap: Decimal | None = None
    shares_outstanding: Decimal | None = None
    trailing_pe: Decimal | None = None
    forward_pe: Decimal | None = None
    price_to_book: Decimal | None = None
    beta: Decimal | None = None
    dividend_yield: Decimal | None = None
    fifty_two_week_high: Decimal | None = None
    fifty_two_week_low: Decimal | None = None

    def __post_init__(self) -> None:
        check_utc("fetched_at", self.fetched_at)
        if self.currency is not None:
            check_currency(self.currency)
        for name in _NUMBERS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, Decimal) or not value.is_finite()):
                raise ValueError(f"{name} must be a finite Decimal or None, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FundamentalsReport:
    """The figures of `symbol` for the period ending `period_end`, published at `published_at`.

    `values` maps a figure's name (`revenue`, `net_income`, `eps`, `pe_ratio`, ...) to its exact
    value, in `currency` where it is an amount.
    """

    symbol: str
    period_end: date
    published_at: datetime
    currency: str
    values: Mapping[str, Decimal]
    source: str = ""

    def __post_init__(self) -> None:
        check_utc("published_at", self.published_at)
        check_currency(self.currency)
        if not self.values:
            raise ValueError(f"fundamentals report of {self.symbol} has no values")
        for name, value in self.values.items():
            if not isinstance(value, Decimal) or not value.is_finite():
                raise ValueError(f"{self.symbol} {name} must be a finite Decimal, got {value!r}")
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))


class FundamentalsSource(Protocol):
    """A source of fundamentals reports (`RecordedFundamentals`, `LiveFundamentals`).

    `reports` returns the reports of `symbol` published in `[start_at, end_at)`, newest first, at
    most `limit`. `point_in_time` is True only when each report's figures are as published then
    (never restated later); a source that cannot promise this is refused by the tool.
    """

    @property
    def name(self) -> str:
        """A stable id for logs ("recorded", "yfinance", ...)."""
        ...

    @property
    def point_in_time(self) -> bool:
        """Whether the figures are exactly those published at each report's `published_at`."""
        ...

    async def reports(
        self, symbol: str, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[FundamentalsReport]:
        """Reports of `symbol` published in `[start_at, end_at)`, newest first."""
        ...


@dataclass(frozen=True, slots=True)
class RecordedFundamentals:
    """Recorded point-in-time reports, served from memory (the replay and test source)."""

    items: Sequence[FundamentalsReport] = field(default=())
    name: str = "recorded"
    point_in_time: bool = True

    @classmethod
    def of(
        cls, items: Iterable[FundamentalsReport], *, point_in_time: bool = True
    ) -> RecordedFundamentals:
        """A source over `items` (any order)."""
        ordered = tuple(sorted(items, key=lambda item: item.published_at, reverse=True))
        return cls(ordered, point_in_time=point_in_time)

    async def reports(
        self, symbol: str, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[FundamentalsReport]:
        """See `FundamentalsSource.reports`."""
        found = [
            item
            for item in self.items
            if item.symbol == symbol and start_at <= item.published_at < end_at
        ]
        found.sort(key=lambda item: item.published_at, reverse=True)
        return tuple(found[:limit])


class LiveFundamentals:
    """A live vendor's snapshots as reports: each published at its `fetched_at`, for that day.

    `fetch(symbol, at)` is the adapter's snapshot read (`YahooSource.fundamentals`); a snapshot
    without a currency is reported in `currency` (the market's). Asked for reports published in
    `[start_at, end_at)`, it fetches one snapshot as of just before `end_at` (the decision time,
    for the tool) and returns it when its stamp falls in the window and it reports any figure.
    """

    point_in_time = True

    def __init__(
        self,
        fetch: Callable[[str, datetime], Awaitable[Fundamentals]],
        *,
        name: str,
        currency: str,
    ) -> None:
        check_currency(currency)
        self._fetch = fetch
        self._name = name
        self._currency = currency

    @property
    def name(self) -> str:
        """The vendor's id."""
        return self._name

    async def reports(
        self, symbol: str, start_at: datetime, end_at: datetime, limit: int
    ) -> Sequence[FundamentalsReport]:
        """See `FundamentalsSource.reports`."""
        check_utc("start_at", start_at)
        check_utc("end_at", end_at)
        if limit <= 0 or end_at <= start_at:
            return ()
        snapshot = await self._fetch(symbol, end_at - timedelta(microseconds=1))
        values = {name: getattr(snapshot, name) for name in _NUMBERS}
        figures = {name: value for name, value in values.items() if value is not None}
        if not figures or not start_at <= snapshot.fetched_at < end_at:
            return ()
        return (
            FundamentalsReport(
                symbol=symbol,
                period_end=snapshot.fetched_at.date(),
                published_at=snapshot.fetched_at,
                currency=snapshot.currency or self._currency,
                values=figures,
                source=snapshot.source,
            ),
        )
