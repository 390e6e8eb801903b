"""StockBench's fundamentals, point in time, from what a vendor serves with dates.

StockBench (arXiv 2510.02209, section 3.1) shows its agents, for the stocks they pick, "market
capitalization, P/E ratio, dividend yield, 52-week high/low, and recent quarterly dividends". A
vendor's snapshot of them (yfinance's `Ticker.info`) is today's: served for a past decision it
would leak the future. This module owns `daily_reports`, which rebuilds them for each session
from dated facts only, one `FundamentalsReport` per session published at its open:

- `fifty_two_week_high` / `fifty_two_week_low`: the highest high and lowest low of the raw daily
  bars ended by the open, over the 365 days before it (left out while the bars held do not reach
  back that far);
- `last_dividend`: the latest cash dividend per share gone ex on or before the session (the
  "recent quarterly dividend"); `dividend_yield`: the cash dividends gone ex in the 365 days up to
  the session over the last close before it, a fraction;
- `market_cap`: the latest shares outstanding dated before the session times that close.

The P/E ratio is left out: earnings per share come with their period's end, not the day they
were published, and a guessed publication lag could show a figure before it was known. A session
without any figure gets no report.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Final

from openbell.markets.corporate_actions import ActionKind, CorporateAction
from openbell.markets.domain import Bar
from openbell.markets.fundamentals import FundamentalsReport

YEAR: Final = timedelta(days=365)
#: The vendor these figures are rebuilt from is named in each report's `source`.
SOURCE_SUFFIX: Final = "derived"


def daily_reports(
    symbol: str,
    bars: Sequence[Bar],
    actions: Sequence[CorporateAction],
    shares: Sequence[tuple[date, Decimal]],
    *,
    sessions: Sequence[tuple[date, datetime]],
    currency: str,
    source: str,
) -> list[FundamentalsReport]:
    """A report of `symbol` for each of `sessions` ((local date, open instant), in order), from
    its raw daily `bars` (any order), its corporate `actions` and its dated `shares` counts; see
    the module docstring. `source` names the vendor."""
    ordered = sorted(bars, key=lambda bar: bar.end_at)
    ends = [bar.end_at for bar in ordered]
    dividends = sorted(
        (a.ex_date, a.cash)
        for a in actions
        if a.symbol == symbol and a.kind is ActionKind.CASH_DIVIDEND and a.cash > 0
    )
    counts = sorted(shares)
    first_start = ordered[0].start_at if ordered else None
    out: list[FundamentalsReport] = []
    for day, opened in sessions:
        ended = bisect.bisect_right(ends, opened)  # the bars ended by the open
        if ended == 0:
            continue
        close = ordered[ended - 1].close
        values: dict[str, Decimal] = {}
        if first_start is not None and first_start <= opened - YEAR:
            year = ordered[bisect.bisect_right(ends, opened - YEAR) : ended]
            values["fifty_two_week_high"] = max(bar.high for bar in year)
            values["fifty_two_week_low"] = min(bar.low for bar in year)
        paid = [(ex, cash) for ex, cash in dividends if ex <= day]
        if paid:
            values["last_dividend"] = paid[-1][1]
            trailing = sum((cash for ex, cash in paid if ex > day - YEAR), Decimal(0))
            values["dividend_yield"] = (trailing / close).quantize(Decimal("0.000001"))
        known = [count for dated, count in counts if dated < day]
        if known:
            values["market_cap"] = (known[-1] * close).quantize(Decimal(1))
        if values:
            out.append(
                FundamentalsReport(
                    symbol=symbol,
                    period_end=day,
                    published_at=opened,
                    currency=currency,
                    values=values,
                    source=f"{source}-{SOURCE_SUFFIX}",
                )
            )
    return out
