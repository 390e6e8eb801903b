"""Company fundamentals as a domain value: the facts and ratios a vendor reports about a symbol.

This module owns `Fundamentals`. Vendors publish these as a snapshot of today (yfinance's
`Ticker.info` has no history), so the only honest stamp is `fetched_at`, and the value is marked
`point_in_time=False`: a replay must never show an agent a snapshot fetched after its decision
time, and a live cycle may show one only if it was fetched at or before `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

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
