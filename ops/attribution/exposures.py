"""Style exposures of a universe at a decision time, point-in-time (nothing ended after it).

This module owns what each style factor measures and which data it may read. Exposures at `at`
read only bars whose end is `<= at` (the bars an agent could see at `at`, DESIGN §2) and
fundamentals reports published `<= at`. The bars are one interval's (the cadence's: `1d` for a
daily series, `1h` for an hourly one), laid on a `PricePanel`: one row per bar end, one column per
symbol. With `L = lookback` and `R = reversal` bars, a symbol's window is the `L + 1` last closes
`c[0..L]` ended by `at` (a symbol missing any of them has no price-based exposure at `at`):

- `beta`: the slope of its `L` bar returns on the equal-weighted mean return of the symbols with
  a full window (`cov / var`, sample moments);
- `momentum`: `c[L-R] / c[0] - 1`, the return over the window without its last `R` bars;
- `reversal` (short-term reversal): `c[L] / c[L-R] - 1`, the return of the last `R` bars;
- `volatility`: the sample standard deviation of the `L` bar returns;
- `liquidity`: the log of the mean traded value (`close * volume`) over the `L` bars;
- `size`: the log of the market capitalisation, and `value`: book-to-price (the report's
  `book_to_price`, else `1 / price_to_book`), from the latest report published `<= at`. These
  two exist only with a fundamentals source whose reports are point-in-time; without one they
  are skipped, and said so (`Exposures.skipped`). openbell's bundled data holds no point-in-time
  fundamentals.

The mean traded value is also each symbol's regression weight (`cross_section`). Prices are
converted to float once, here: exposures are statistics, not money.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from openbell.markets.domain import Bar, check_utc
from openbell.markets.fundamentals import FundamentalsReport

Matrix = npt.NDArray[np.float64]

#: The style factors in their fixed order (the VIF screen drops the later one on a tie).
PRICE_FACTORS: tuple[str, ...] = ("beta", "momentum", "reversal", "volatility", "liquidity")
FUNDAMENTAL_FACTORS: tuple[str, ...] = ("size", "value")
STYLE_FACTORS: tuple[str, ...] = PRICE_FACTORS + FUNDAMENTAL_FACTORS
#: Why size and value are absent without a point-in-time fundamentals source.
NO_FUNDAMENTALS = "no point-in-time fundamentals"


@dataclass(frozen=True, slots=True, kw_only=True)
class StyleWindows:
    """How many bars the price-based exposures look back over (`lookback`) and how many of the
    last ones are the short-term reversal window (`reversal`), excluded from momentum."""

    lookback: int = 20
    reversal: int = 5

    def __post_init__(self) -> None:
        if self.lookback < 3:
            raise ValueError(f"lookback must be at least 3 bars, got {self.lookback}")
        if not 1 <= self.reversal < self.lookback:
            raise ValueError(
                f"reversal must be in [1, lookback), got {self.reversal} of {self.lookback}"
            )


@dataclass(frozen=True, slots=True)
class PricePanel:
    """Closes and traded values of symbols, one row per bar end (increasing), NaN where a symbol
    has no bar ending then. Build it with `of_bars`."""

    symbols: tuple[str, ...]
    ends: tuple[datetime, ...]
    closes: Matrix
    traded: Matrix

    @classmethod
    def of_bars(cls, bars: Mapping[str, Sequence[Bar]]) -> PricePanel:
        """A panel over the bars of each symbol (all of one interval)."""
        symbols = tuple(sorted(bars))
        ends = tuple(sorted({bar.end_at for series in bars.values() for bar in series}))
        row = {end: index for index, end in enumerate(ends)}
        closes = np.full((len(ends), len(symbols)), np.nan)
        traded = np.full((len(ends), len(symbols)), np.nan)
        for column, symbol in enumerate(symbols):
            for bar in bars[symbol]:
                close = float(bar.close)
                closes[row[bar.end_at], column] = close
                traded[row[bar.end_at], column] = close * float(bar.volume)
        return cls(symbols=symbols, ends=ends, closes=closes, traded=traded)

    def ended_by(self, at: datetime) -> int:
        """How many rows end at or before `at`."""
        return bisect.bisect_right(self.ends, at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Exposures:
    """Raw style exposures at `at` (rows: `symbols`, columns: `factors`; NaN: unknown), each
    symbol's mean traded value (NaN: unknown) and the factors skipped, with why."""

    at: datetime
    symbols: tuple[str, ...]
    factors: tuple[str, ...]
    values: Matrix
    traded: npt.NDArray[np.float64]
    skipped: Mapping[str, str]


class Fundamentals:
    """Point-in-time fundamentals reports by symbol, for the size and value exposures."""

    def __init__(self, reports: Sequence[FundamentalsReport]) -> None:
        by_symbol: dict[str, list[FundamentalsReport]] = {}
        for report in sorted(reports, key=lambda item: item.published_at):
            by_symbol.setdefault(report.symbol, []).append(report)
        self._reports = by_symbol
        self._published = {
            symbol: [report.published_at for report in found] for symbol, found in by_symbol.items()
        }

    def latest(self, symbol: str, at: datetime) -> FundamentalsReport | None:
        """The last report of `symbol` published at or before `at`."""
        published = self._published.get(symbol)
        if not published:
            return None
        index = bisect.bisect_right(published, at)
        return self._reports[symbol][index - 1] if index else None


def _size(report: FundamentalsReport | None) -> float:
    cap = report.values.get("market_cap") if report else None
    return math.log(float(cap)) if cap is not None and cap > 0 else math.nan


def _value(report: FundamentalsReport | None) -> float:
    if report is None:
        return math.nan
    book_to_price = report.values.get("book_to_price")
    if book_to_price is not None:
        return float(book_to_price)
    price_to_book = report.values.get("price_to_book")
    return (
        1.0 / float(price_to_book) if price_to_book is not None and price_to_book > 0 else math.nan
    )


def _price_exposures(panel: PricePanel, at: datetime, windows: StyleWindows) -> Matrix:
    """The price-based columns (`PRICE_FACTORS`) and, last, the mean traded value."""
    lookback, reversal = windows.lookback, windows.reversal
    out = np.full((len(panel.symbols), len(PRICE_FACTORS) + 1), np.nan)
    stop = panel.ended_by(at)
    if stop < lookback + 1:
        return out
    closes = panel.closes[stop - lookback - 1 : stop]
    traded = panel.traded[stop - lookback - 1 : stop]
    full = ~np.isnan(closes).any(axis=0) & (closes > 0).all(axis=0)
    if not full.any():
        return out
    kept = closes[:, full]
    returns = kept[1:] / kept[:-1] - 1.0
    market = returns.mean(axis=1)
    centred = market - market.mean()
    spread = float(centred @ centred)
    beta = (
        ((returns - returns.mean(axis=0)).T @ centred) / spread
        if spread > 0
        else np.full(kept.shape[1], np.nan)
    )
    momentum = kept[lookback - reversal] / kept[0] - 1.0
    recent = kept[lookback] / kept[lookback - reversal] - 1.0
    volatility = returns.std(axis=0, ddof=1)
    mean_traded = np.nanmean(traded[1:, full], axis=0)
    with np.errstate(divide="ignore"):
        liquidity = np.where(mean_traded > 0, np.log(np.maximum(mean_traded, 1e-300)), np.nan)
    out[full] = np.column_stack([beta, momentum, recent, volatility, liquidity, mean_traded])
    return out


def style_exposures(
    panel: PricePanel,
    at: datetime,
    *,
    windows: StyleWindows | None = None,
    fundamentals: Fundamentals | None = None,
) -> Exposures:
    """The style exposures of every symbol of `panel` at `at` (see the module docstring).

    Without `fundamentals`, `size` and `value` are skipped (`NO_FUNDAMENTALS`); with it, a
    factor no symbol has a report for at `at` is skipped too.
    """
    check_utc("at", at)
    price = _price_exposures(panel, at, windows or StyleWindows())
    factors = list(PRICE_FACTORS)
    columns = [price[:, index] for index in range(len(PRICE_FACTORS))]
    skipped: dict[str, str] = {}
    if fundamentals is None:
        skipped = dict.fromkeys(FUNDAMENTAL_FACTORS, NO_FUNDAMENTALS)
    else:
        reports = [fundamentals.latest(symbol, at) for symbol in panel.symbols]
        for name, measure in (("size", _size), ("value", _value)):
            column = np.array([measure(report) for report in reports], dtype=np.float64)
            if np.isnan(column).all():
                skipped[name] = f"no report published by {at.isoformat()} gives {name}"
            else:
                factors.append(name)
                columns.append(column)
    return Exposures(
        at=at,
        symbols=panel.symbols,
        factors=tuple(factors),
        values=np.column_stack(columns),
        traded=price[:, -1],
        skipped=MappingProxyType(skipped),
    )
