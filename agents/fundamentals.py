"""The fundamentals port: reported company figures, served only as they were known at `now`.

This module owns `FundamentalsReport` (one published report of one symbol: its period, when it was
published, its figures as exact decimals), the `FundamentalsSource` protocol that live adapters
will implement, and `RecordedFundamentals`, the in-memory source of recorded reports that replays
and tests use. A report is observable only once `published_at <= now` (DESIGN §2): the source
answers time ranges and the `get_fundamentals` tool filters again, so a source's mistake cannot
leak. A source whose figures are not point-in-time (a vendor's "current" snapshot, restated
figures) says so with `point_in_time = False`, and the tool refuses to serve it. Where a replay
has no fundamentals source at all, the tool refuses too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Protocol

from openbell.markets.domain import check_currency, check_utc


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
    """A source of fundamentals reports (to be implemented by the live adapters).

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
