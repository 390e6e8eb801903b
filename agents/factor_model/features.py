"""The factor model's features and training rows, computed point-in-time from daily bars.

This module owns what the `factor_model` baseline learns from: nine price-volume features per
(symbol, session), in the style of Qlib's Alpha158 (whose names they carry where one exists), and
the training rows that pair them with a forward return. KTD-Fin trains its factor baselines on
"Alpha9" features and names the families of its nine style factors (momentum, volatility,
liquidity, reversal, skewness, volume-price interaction) without printing their formulas; this
set covers those families and is openbell's own choice:

| feature | over the symbol's own daily bars (i = the row's bar) | Alpha158 |
|---|---|---|
| `ret_5`, `ret_20`, `ret_60` | `close[i] / close[i-n] - 1` (reversal, momentum) | ROC5/20/60 |
| `vol_20` | sample std of the last 20 daily close-to-close returns | STD20 of returns |
| `skew_20` | skewness of the same 20 returns | - |
| `volume_ratio_5_20` | mean volume of the last 5 bars / of the last 20 | VMA5 / VMA20 |
| `amount_20` | log of the mean of `close x volume` over 20 bars (liquidity, size) | - |
| `corr_close_volume_20` | correlation of close and log(volume + 1) over 20 bars | CORR20 |
| `rsv_20` | `(close - min low) / (max high - min low)` over 20 bars | RSV20 |

A row's features read its bar and the 60 before it (`FEATURE_BARS` in all), counted in the
symbol's own bars, so a suspension shortens no window. Its label is the forward return of
`label_sessions` bars, `close[i+h] / close[i] - 1`, graded within the row's session into
`GRADES` quantile grades (what a LightGBM ranker learns). Point-in-time: every function takes the
instant it computes for and drops first every bar not ended by it, so a row's label exists only
once the bar `h` bars after it has ended (the last usable row is the one whose label window ended
by that instant), and a bar that ends later can change nothing. Numbers are floats: these are
statistics, not money (each price is converted once, here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import numpy as np
import numpy.typing as npt

from openbell.markets.domain import Bar, check_utc

FEATURES: Final = (
    "ret_5",
    "ret_20",
    "ret_60",
    "vol_20",
    "skew_20",
    "volume_ratio_5_20",
    "amount_20",
    "corr_close_volume_20",
    "rsv_20",
)
#: The bars one row reads: its own and the 60 before it (for `ret_60`).
FEATURE_BARS: Final = 61
#: The quantile grades a session's forward returns are sorted into (0: worst, GRADES - 1: best).
GRADES: Final = 5
_WINDOW: Final = 20

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Series:
    """One symbol's daily bars ended by the instant, as float columns, oldest first."""

    starts: tuple[datetime, ...]
    close: list[float]
    high: list[float]
    low: list[float]
    volume: list[float]


def _series(bars: Sequence[Bar], until: datetime, *, last: int | None = None) -> _Series:
    """The bars of `bars` ended by `until`, oldest first (only the `last` of them when given)."""
    kept = sorted((bar for bar in bars if bar.end_at <= until), key=lambda bar: bar.start_at)
    if last is not None:
        kept = kept[-last:]
    return _Series(
        starts=tuple(bar.start_at for bar in kept),
        close=[float(bar.close) for bar in kept],
        high=[float(bar.high) for bar in kept],
        low=[float(bar.low) for bar in kept],
        volume=[float(bar.volume) for bar in kept],
    )


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def _mean(values: Sequence[float]) -> float:
    # `fsum` is exactly rounded: a row's value does not depend on the order of the additions.
    return math.fsum(values) / len(values)


def _row(series: _Series, i: int) -> list[float]:
    """The features of `series`'s bar `i` (needs `i >= FEATURE_BARS - 1`), in plain floats: the
    same numbers whatever else the series holds."""
    close, volume = series.close, series.volume
    first = i - _WINDOW + 1
    returns = [close[j] / close[j - 1] - 1 for j in range(first, i + 1)]
    centre = _mean(returns)
    deviations = [r - centre for r in returns]
    squares = math.fsum(d * d for d in deviations)
    spread = math.sqrt(squares / (_WINDOW - 1))
    population = math.sqrt(squares / _WINDOW)
    skew = _mean([d**3 for d in deviations]) / population**3 if population else 0.0
    closes = close[first : i + 1]
    logs = [math.log(v + 1) for v in volume[first : i + 1]]
    low, high = min(series.low[first : i + 1]), max(series.high[first : i + 1])
    return [
        close[i] / close[i - 5] - 1,
        close[i] / close[i - 20] - 1,
        close[i] / close[i - 60] - 1,
        spread,
        skew,
        _ratio(_mean(volume[i - 4 : i + 1]), _mean(volume[first : i + 1])),
        math.log(_mean([c * v for c, v in zip(closes, volume[first : i + 1], strict=True)]) + 1),
        _correlation(closes, logs),
        _ratio(close[i] - low, high - low),
    ]


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson's correlation of `xs` and `ys`; 0 when either does not vary."""
    mx, my = _mean(xs), _mean(ys)
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx, syy = math.fsum(d * d for d in dx), math.fsum(d * d for d in dy)
    if not sxx or not syy:
        return 0.0
    return math.fsum(a * b for a, b in zip(dx, dy, strict=True)) / math.sqrt(sxx * syy)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureRows:
    """Feature rows at one decision instant: `symbols[j]`'s row is `values[j]` (columns in
    `FEATURES` order), each of the session that started at `session_at` (the latest session of
    any of the symbols' bars ended by then; a symbol whose last bar is older is left out)."""

    as_of: datetime
    session_at: datetime | None
    symbols: tuple[str, ...]
    values: Matrix


def latest_rows(bars: Mapping[str, Sequence[Bar]], now: datetime) -> FeatureRows:
    """The feature row of each symbol at its last daily bar ended by `now`, for the symbols whose
    last bar is of the latest session and which have `FEATURE_BARS` bars, sorted by symbol."""
    check_utc("now", now)
    every = {symbol: _series(found, now, last=FEATURE_BARS) for symbol, found in bars.items()}
    lasts = [series.starts[-1] for series in every.values() if series.starts]
    session_at = max(lasts, default=None)
    symbols: list[str] = []
    rows: list[list[float]] = []
    for symbol in sorted(every):
        series = every[symbol]
        if len(series.starts) < FEATURE_BARS or series.starts[-1] != session_at:
            continue
        symbols.append(symbol)
        rows.append(_row(series, len(series.starts) - 1))
    values = np.array(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))
    return FeatureRows(as_of=now, session_at=session_at, symbols=tuple(symbols), values=values)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSet:
    """The rows a model is trained on at `as_of`, grouped by session (oldest first, each group's
    rows sorted by symbol): `values` are the features, `returns` the forward returns, `grades`
    their quantile grades within the session, `groups` the size of each session's group and
    `sessions` its start."""

    as_of: datetime
    sessions: tuple[datetime, ...]
    symbols: tuple[str, ...]
    values: Matrix
    returns: Matrix
    grades: npt.NDArray[np.int64]
    groups: tuple[int, ...]

    @property
    def rows(self) -> int:
        """How many rows it has."""
        return len(self.symbols)


def grades_of(returns: Matrix) -> npt.NDArray[np.int64]:
    """The quantile grade (0..GRADES - 1) of each of one session's returns: its rank (ties in
    order of position) scaled to the grades, so the best return has the top grade."""
    order = np.argsort(returns, kind="stable")
    ranks = np.empty(len(returns), dtype=np.int64)
    ranks[order] = np.arange(len(returns))
    return (ranks * GRADES) // len(returns)


def training_set(
    bars: Mapping[str, Sequence[Bar]],
    as_of: datetime,
    *,
    label_sessions: int,
    train_sessions: int,
) -> TrainingSet:
    """The training rows known at `as_of`: each (symbol, bar) with `FEATURE_BARS` bars up to it
    and the bar `label_sessions` later ended by `as_of`, of the last `train_sessions` sessions
    that have such rows from two symbols or more (a ranking needs two)."""
    check_utc("as_of", as_of)
    if label_sessions < 1 or train_sessions < 1:
        raise ValueError("label_sessions and train_sessions must be at least 1")
    every = {symbol: _series(bars[symbol], as_of) for symbol in sorted(bars)}
    # The sessions with a labelled row of two symbols or more, the last `train_sessions` of them.
    counts: dict[datetime, int] = {}
    for series in every.values():
        for at in series.starts[FEATURE_BARS - 1 : len(series.starts) - label_sessions]:
            counts[at] = counts.get(at, 0) + 1
    sessions = [at for at in sorted(counts) if counts[at] >= 2][-train_sessions:]
    wanted = set(sessions)
    found: dict[datetime, list[tuple[str, list[float], float]]] = {at: [] for at in sessions}
    for symbol, series in every.items():
        for i in range(FEATURE_BARS - 1, len(series.starts) - label_sessions):
            if series.starts[i] in wanted:
                forward = series.close[i + label_sessions] / series.close[i] - 1
                found[series.starts[i]].append((symbol, _row(series, i), forward))
    symbols: list[str] = []
    rows: list[list[float]] = []
    returns: list[float] = []
    grades: list[npt.NDArray[np.int64]] = []
    for at in sessions:
        group = found[at]
        symbols.extend(symbol for symbol, _, _ in group)
        rows.extend(row for _, row, _ in group)
        session_returns = np.array([value for _, _, value in group], dtype=np.float64)
        returns.extend(session_returns.tolist())
        grades.append(grades_of(session_returns))
    return TrainingSet(
        as_of=as_of,
        sessions=tuple(sessions),
        symbols=tuple(symbols),
        values=np.array(rows, dtype=np.float64).reshape(len(rows), len(FEATURES)),
        returns=np.array(returns, dtype=np.float64),
        grades=np.concatenate(grades) if grades else np.zeros(0, dtype=np.int64),
        groups=tuple(len(found[at]) for at in sessions),
    )
