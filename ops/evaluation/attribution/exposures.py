"""Style exposures of a universe at a decision time, point-in-time (nothing ended after it).

This module owns what each style factor measures and which data it may read. Exposures at `at`
read only bars whose end is `<= at` (the bars an agent could see at `at`, DESIGN §2) and
fundamentals reports published `<= at`. The bars are one interval's (the cadence's: `1d` for a
daily series, `1h` for an hourly one), laid on a `PricePanel`: one row per bar end, one column per
symbol. With `L = lookback` and `R = reversal` bars, a symbol's window is the `L + 1` last closes
`c[0..L]` ended by `at`, and the `L` bars ending at `c[1..L]` (their opens `o`, volumes `v`,
returns `r = c[k] / c[k-1] - 1`); a symbol missing any of them has no window-based exposure:

- `beta`: the slope of its `L` bar returns on the equal-weighted mean return of the symbols with
  a full window (`cov / var`, sample moments);
- `momentum`: `c[L-R] / c[0] - 1`, the return over the window without its last `R` bars;
- `reversal` (short-term reversal): `c[L] / c[L-R] - 1`, the return of the last `R` bars;
- `volatility`: the sample standard deviation of the `L` bar returns;
- `liquidity`: the log of the mean traded value (`close * volume`) over the `L` bars;
- `skewness`: the skewness of the `L` bar returns (third central moment over the cubed
  population standard deviation; none without dispersion);
- `volume_return_corr`: the Pearson correlation of the `L` bar returns with the same bars'
  volumes (none when either has no dispersion);
- `intraday_momentum`: `prod(c[k] / o[k]) - 1` over the `L` bars: the open-to-close return,
  overnight gaps left out;
- `high_52w` (the 52-week-high anchor): `c[L]` over the highest high of the bars that ended in
  the 52 weeks (364 days) up to `at`; a symbol whose bars do not reach back 52 weeks (none ended
  by `at - 364 days`) has none, and when no symbol has one the style is skipped, and said so;
- `amount_variability`: the coefficient of variation (sample standard deviation over mean) of
  the traded amount of the `L` bars. Only with the vendor's amount column (`PricePanel.amounts`):
  `close * volume` is not the amount traded over a bar, so without it the style is skipped
  (`NO_AMOUNT`). openbell's bars carry no amount;
- `size`: the log of the market capitalisation, and `value`: book-to-price (the report's
  `book_to_price`, else `1 / price_to_book`), from the latest report published `<= at`. These
  two exist only with a fundamentals source whose reports are point-in-time; without one they
  are skipped, and said so (`Exposures.skipped`). openbell's bundled data holds no point-in-time
  fundamentals.

KTD-Fin prints neither these definitions nor their windows (its appendix table is not in the
paper's text); `docs/guide/ktd-fin-evaluation.md` says where openbell chose. A style set
(`STYLE_SETS`) picks the styles computed: `openbell` (all of the above) or `ktd-fin` (the
paper's nine: every price style but beta). The mean traded value is also each symbol's
regression weight (`cross_section`). Prices are converted to float once, here: exposures are
statistics, not money.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from openbell.markets.domain import Bar, check_utc
from openbell.markets.fundamentals import FundamentalsReport

Matrix = npt.NDArray[np.float64]

#: The window styles of openbell's first set, in their fixed order.
PRICE_FACTORS: tuple[str, ...] = ("beta", "momentum", "reversal", "volatility", "liquidity")
#: The styles KTD-Fin adds to them (skewness and the volume-price interaction ones).
KTD_FACTORS: tuple[str, ...] = (
    "skewness",
    "volume_return_corr",
    "intraday_momentum",
    "high_52w",
    "amount_variability",
)
FUNDAMENTAL_FACTORS: tuple[str, ...] = ("size", "value")
#: Every style in its fixed order: the VIF screen drops the later one on a tie, a thin
#: cross-section the last ones first (`cross_section`). KTD-Fin's come last, so openbell's first
#: set is estimated as it was before they were added.
STYLE_FACTORS: tuple[str, ...] = PRICE_FACTORS + FUNDAMENTAL_FACTORS + KTD_FACTORS
#: The style sets a config may name: openbell's (every style) and KTD-Fin's nine.
STYLE_SETS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "openbell": STYLE_FACTORS,
        "ktd-fin": tuple(name for name in PRICE_FACTORS + KTD_FACTORS if name != "beta"),
    }
)
#: Why size and value are absent without a point-in-time fundamentals source.
NO_FUNDAMENTALS = "no point-in-time fundamentals"
#: Why amount variability is absent without the vendor's amount column.
NO_AMOUNT = "the bars carry no traded amount (close x volume is not the amount)"
#: The 52-week-high anchor's window.
YEAR = timedelta(days=364)


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
    """Opens, highs, closes, volumes and traded values (`close * volume`) of symbols, one row per
    bar end (increasing), NaN where a symbol has no bar ending then; `amounts`, the vendor's
    traded amounts, only when the bars' source has them (None: no amount column). Build it with
    `of_bars`."""

    symbols: tuple[str, ...]
    ends: tuple[datetime, ...]
    closes: Matrix
    traded: Matrix
    opens: Matrix
    highs: Matrix
    volumes: Matrix
    amounts: Matrix | None = None

    @classmethod
    def of_bars(
        cls,
        bars: Mapping[str, Sequence[Bar]],
        *,
        amounts: Mapping[str, Mapping[datetime, float]] | None = None,
    ) -> PricePanel:
        """A panel over the bars of each symbol (all of one interval) and, when the source has
        them, each bar's traded amount by symbol and bar end (a bar without one: NaN)."""
        symbols = tuple(sorted(bars))
        ends = tuple(sorted({bar.end_at for series in bars.values() for bar in series}))
        row = {end: index for index, end in enumerate(ends)}
        shape = (len(ends), len(symbols))
        closes, opens, highs, volumes = (np.full(shape, np.nan) for _ in range(4))
        amount = None if amounts is None else np.full(shape, np.nan)
        for column, symbol in enumerate(symbols):
            for bar in bars[symbol]:
                at = row[bar.end_at]
                closes[at, column] = float(bar.close)
                opens[at, column] = float(bar.open)
                highs[at, column] = float(bar.high)
                volumes[at, column] = float(bar.volume)
            if amount is not None and amounts is not None:
                for end, value in amounts.get(symbol, {}).items():
                    if end in row:
                        amount[row[end], column] = value
        return cls(
            symbols=symbols,
            ends=ends,
            closes=closes,
            traded=closes * volumes,
            opens=opens,
            highs=highs,
            volumes=volumes,
            amounts=amount,
        )

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


def _columnwise(left: Matrix, right: Matrix, measure: str) -> npt.NDArray[np.float64]:
    """Per column of `left` (rows: observations): its skewness (`measure` "skew") or its
    correlation with the same column of `right` ("corr"); NaN without dispersion."""
    centred = left - left.mean(axis=0)
    spread = np.sqrt((centred**2).mean(axis=0))
    flat = ~(spread > 1e-12 * np.maximum(1.0, np.abs(left).max(axis=0)))
    safe = np.where(flat, 1.0, spread)
    if measure == "skew":
        out = (centred**3).mean(axis=0) / safe**3
    else:
        other = right - right.mean(axis=0)
        other_spread = np.sqrt((other**2).mean(axis=0))
        flat |= ~(other_spread > 1e-12 * np.maximum(1.0, np.abs(right).max(axis=0)))
        out = (centred * other).mean(axis=0) / (safe * np.where(flat, 1.0, other_spread))
    return np.where(flat, np.nan, out)


def _window_exposures(panel: PricePanel, at: datetime, windows: StyleWindows) -> dict[str, Matrix]:
    """Every window style's column (NaN for a symbol without a full window) and, under `traded`,
    the mean traded value."""
    lookback, reversal = windows.lookback, windows.reversal
    names = (*PRICE_FACTORS, "skewness", "volume_return_corr", "intraday_momentum", "traded")
    out = {name: np.full(len(panel.symbols), np.nan) for name in names}
    stop = panel.ended_by(at)
    if stop < lookback + 1:
        return out
    rows = slice(stop - lookback - 1, stop)
    closes, volumes, opens = panel.closes[rows], panel.volumes[rows], panel.opens[rows]
    full = ~np.isnan(closes).any(axis=0) & (closes > 0).all(axis=0)
    full &= ~np.isnan(volumes[1:]).any(axis=0) & ~np.isnan(opens[1:]).any(axis=0)
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
    mean_traded = np.nanmean(panel.traded[rows][1:, full], axis=0)
    with np.errstate(divide="ignore"):
        liquidity = np.where(mean_traded > 0, np.log(np.maximum(mean_traded, 1e-300)), np.nan)
    found = {
        "beta": beta,
        "momentum": kept[lookback - reversal] / kept[0] - 1.0,
        "reversal": kept[lookback] / kept[lookback - reversal] - 1.0,
        "volatility": returns.std(axis=0, ddof=1),
        "liquidity": liquidity,
        "skewness": _columnwise(returns, returns, "skew"),
        "volume_return_corr": _columnwise(returns, volumes[1:, full], "corr"),
        "intraday_momentum": np.prod(kept[1:] / opens[1:, full], axis=0) - 1.0,
        "traded": mean_traded,
    }
    for name, column in found.items():
        out[name][full] = column
    return out


def _high_52w(panel: PricePanel, at: datetime) -> tuple[Matrix, str | None]:
    """The 52-week-high anchor of every symbol, and why it is skipped when no symbol has one."""
    stop = panel.ended_by(at)
    first = panel.ended_by(at - YEAR)
    out = np.full(len(panel.symbols), np.nan)
    if stop == 0 or first == 0:
        return out, f"no bars reach back 52 weeks before {at.isoformat()}"
    reached = ~np.isnan(panel.closes[:first]).all(axis=0)
    highs = panel.highs[first:stop]
    known = reached & ~np.isnan(panel.closes[stop - 1]) & ~np.isnan(highs).all(axis=0)
    if known.any():
        out[known] = panel.closes[stop - 1, known] / np.nanmax(highs[:, known], axis=0)
        return out, None
    return out, f"no symbol's bars reach back 52 weeks before {at.isoformat()}"


def _amount_variability(
    panel: PricePanel, at: datetime, windows: StyleWindows
) -> tuple[Matrix, str | None]:
    """The amount variability of every symbol, and why it is skipped when it cannot be had."""
    out = np.full(len(panel.symbols), np.nan)
    if panel.amounts is None:
        return out, NO_AMOUNT
    stop = panel.ended_by(at)
    if stop >= windows.lookback:
        amounts = panel.amounts[stop - windows.lookback : stop]
        full = ~np.isnan(amounts).any(axis=0) & (amounts > 0).all(axis=0)
        if full.any():
            kept = amounts[:, full]
            out[full] = kept.std(axis=0, ddof=1) / kept.mean(axis=0)
            return out, None
    return out, f"no symbol has {windows.lookback} bars with an amount by {at.isoformat()}"


def style_exposures(
    panel: PricePanel,
    at: datetime,
    *,
    windows: StyleWindows | None = None,
    fundamentals: Fundamentals | None = None,
    styles: Sequence[str] = STYLE_FACTORS,
) -> Exposures:
    """The exposures to `styles` (default: every style) of every symbol of `panel` at `at` (see
    the module docstring), in `STYLE_FACTORS` order.

    Without `fundamentals`, `size` and `value` are skipped (`NO_FUNDAMENTALS`); with it, a
    factor no symbol has a report for at `at` is skipped too; so are `high_52w` when no symbol's
    bars reach back 52 weeks and `amount_variability` without amounts.
    """
    check_utc("at", at)
    unknown = sorted(set(styles) - set(STYLE_FACTORS))
    if unknown:
        raise ValueError(f"unknown styles {unknown}; known: {', '.join(STYLE_FACTORS)}")
    chosen = windows or StyleWindows()
    found = _window_exposures(panel, at, chosen)
    skipped: dict[str, str] = {}
    found["high_52w"], reason = _high_52w(panel, at)
    if reason is not None:
        skipped["high_52w"] = reason
    found["amount_variability"], reason = _amount_variability(panel, at, chosen)
    if reason is not None:
        skipped["amount_variability"] = reason
    if fundamentals is None:
        skipped.update(dict.fromkeys(FUNDAMENTAL_FACTORS, NO_FUNDAMENTALS))
    else:
        reports = [fundamentals.latest(symbol, at) for symbol in panel.symbols]
        for name, measure in (("size", _size), ("value", _value)):
            column = np.array([measure(report) for report in reports], dtype=np.float64)
            if np.isnan(column).all():
                skipped[name] = f"no report published by {at.isoformat()} gives {name}"
            else:
                found[name] = column
    factors = tuple(name for name in STYLE_FACTORS if name in styles and name not in skipped)
    values = (
        np.column_stack([found[name] for name in factors])
        if factors
        else np.zeros((len(panel.symbols), 0))
    )
    return Exposures(
        at=at,
        symbols=panel.symbols,
        factors=factors,
        values=values,
        traded=found["traded"],
        skipped=MappingProxyType({k: v for k, v in skipped.items() if k in styles}),
    )
