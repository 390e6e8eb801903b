"""The price-only features of KTD-Fin's research tools, and the limit band of a stock.

This module owns two pure computations. `features_of` turns the daily bars of one stock that had
ended by the decision time (oldest first) into the features every KTD-Fin tool shows: the last
close, 1-, 5- and 20-session returns, the 20-session volatility (sample standard deviation of the
daily returns), the last volume over the median of the last 20 (scale-free, so it says nothing of
a stock's size), and the distance of the last close below its 20-session high; each is None
without enough bars. `limit_band` is the one place a stock's board and daily limit band are read
(the board from the code prefix, the band from the market rules' price limits): the limit-up and
limit-down prices of the next session against its previous close. Fractions are rounded to four
places, the way the tools show them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Final
from zoneinfo import ZoneInfo

from openbell.markets import price_limits
from openbell.markets.domain import Bar, Instrument
from openbell.markets.rules import (
    MarketRules,
    board_of,
    price_limit_pct,
)

#: The sessions of the longest feature (the 20-session return and volatility).
WINDOW: Final = 20
#: The daily bars a stock's features are computed from: the window and the close before it.
FEATURE_BARS: Final = WINDOW + 1
_PLACES: Final = Decimal("0.0001")


@dataclass(frozen=True, slots=True, kw_only=True)
class Features:
    """The features of `symbol` from its daily bars ended by the decision time.

    `cutoff` is the market-local day of the last bar (the data cutoff, T-1 at a session's open);
    `previous_close` the close before the last one (None with a single bar); `returns` the daily
    returns of the last `WINDOW` sessions at most, oldest first (for correlations).
    """

    symbol: str
    cutoff: date
    last_close: Decimal
    previous_close: Decimal | None
    ret_1d: Decimal | None
    ret_5d: Decimal | None
    ret_20d: Decimal | None
    vol_20d: Decimal | None
    volume_ratio: Decimal | None
    high_20d_gap: Decimal | None
    returns: tuple[Decimal, ...]

    @property
    def momentum_vol(self) -> Decimal | None:
        """The 20-session return over the 20-session volatility (a risk-adjusted trend)."""
        if self.ret_20d is None or not self.vol_20d:
            return None
        return rounded(self.ret_20d / self.vol_20d)


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitBand:
    """A stock's board and daily price-limit band: `limit_pct` (0.10 for +-10%) and the
    limit-up and limit-down prices of the session after a close; None where the market has no
    such rule (or no close is known)."""

    board: str | None
    limit_pct: Decimal | None
    limit_up: Decimal | None
    limit_down: Decimal | None


def rounded(value: Decimal) -> Decimal:
    """`value` to four places, as the tools show fractions."""
    return value.quantize(_PLACES)


def features_of(symbol: str, bars: Sequence[Bar], timezone: str) -> Features | None:
    """The features of `symbol` from its daily `bars` (oldest first), or None without a bar."""
    if not bars:
        return None
    window = bars[-FEATURE_BARS:]
    closes = [bar.close for bar in window]
    last = closes[-1]
    returns = tuple(later / earlier - 1 for earlier, later in itertools.pairwise(closes))
    vol = None
    if len(returns) >= WINDOW:
        vol = rounded(Decimal(statistics.stdev(returns[-WINDOW:])))
    traded = [bar.volume for bar in window[-WINDOW:] if bar.volume > 0]
    volume_ratio = None
    if traded and window[-1].volume > 0:
        volume_ratio = rounded(window[-1].volume / Decimal(statistics.median(traded)))
    high = max(bar.high for bar in window[-WINDOW:])
    return Features(
        symbol=symbol,
        cutoff=window[-1].start_at.astimezone(ZoneInfo(timezone)).date(),
        last_close=last,
        previous_close=closes[-2] if len(closes) >= 2 else None,
        ret_1d=_return(closes, 1),
        ret_5d=_return(closes, 5),
        ret_20d=_return(closes, WINDOW),
        vol_20d=vol,
        volume_ratio=volume_ratio,
        high_20d_gap=rounded(last / high - 1),
        returns=tuple(rounded(r) for r in returns[-WINDOW:]),
    )


def _return(closes: Sequence[Decimal], sessions: int) -> Decimal | None:
    if len(closes) <= sessions:
        return None
    return rounded(closes[-1] / closes[-1 - sessions] - 1)


def limit_band(
    instrument: Instrument, rules: MarketRules, previous_close: Decimal | None
) -> LimitBand:
    """The board and limit band of `instrument` for the session after `previous_close`: the band
    execution enforces (`markets.price_limits`: the official limit less the market's
    `limit_buffer_pct`, KTD-Fin's engine buffer when configured), so what the tools show is what
    refuses an order."""
    board = None
    if rules.market == "cn":
        try:
            board = board_of(instrument.symbol).value
        except ValueError:  # not a 6-digit code (no A-share is); its limit is the main board's
            board = None
    official = price_limit_pct(instrument, rules)
    if official is None or rules.price_limits is None:
        return LimitBand(board=board, limit_pct=None, limit_up=None, limit_down=None)
    if previous_close is None or previous_close <= 0:
        enforced = official - rules.price_limits.buffer_pct
        return LimitBand(board=board, limit_pct=enforced, limit_up=None, limit_down=None)
    band = price_limits.limit_band(instrument, rules, previous_close)
    if band is None:  # pragma: no cover  (the market has limits: checked above)
        return LimitBand(board=board, limit_pct=None, limit_up=None, limit_down=None)
    return LimitBand(board=board, limit_pct=band.pct, limit_up=band.up, limit_down=band.down)


def limit_hit(features: Features, instrument: Instrument, rules: MarketRules) -> str | None:
    """ "up" when the last close was at its limit-up against the close before it, "down" at its
    limit-down, else None."""
    band = limit_band(instrument, rules, features.previous_close)
    if band.limit_up is not None and features.last_close >= band.limit_up:
        return "up"
    if band.limit_down is not None and features.last_close <= band.limit_down:
        return "down"
    return None


def correlation(a: Sequence[Decimal], b: Sequence[Decimal]) -> Decimal | None:
    """The Pearson correlation of the common tail of two return series (None under 3 points or
    with a constant series)."""
    n = min(len(a), len(b))
    if n < 3:
        return None
    x, y = a[-n:], b[-n:]
    mean_x, mean_y = sum(x, Decimal(0)) / n, sum(y, Decimal(0)) / n
    cov = sum(((p - mean_x) * (q - mean_y) for p, q in zip(x, y, strict=True)), Decimal(0))
    var_x = sum(((p - mean_x) ** 2 for p in x), Decimal(0))
    var_y = sum(((q - mean_y) ** 2 for q in y), Decimal(0))
    if var_x == 0 or var_y == 0:
        return None
    return rounded(cov / (var_x * var_y).sqrt())
