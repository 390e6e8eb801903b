"""Relative volumes (KTD-Fin masking): the trading volumes a masked model sees.

This module owns `relative_volumes`. A real volume gives a masked series away twice over: the
number itself is in the public data (looked up, it names the stock and the bar's date), and its
level tells stocks apart (which trades most; what a model may remember of a stock's usual volume).
So at every masking level, a series of bars is shown with its volumes relative to itself: each
bar's volume divided by the median volume of the series' bars that traded (a bar that traded the
series' median volume shows 1), to `SIGNIFICANT_DIGITS` significant digits. Every stock's volumes
centre on 1 whatever its size, no number shown is a real volume, and what volume indicators read,
the ratios between the bars of a series, is kept. A series whose bars all traded nothing shows
them as they are (0). The median is the result's: the same bar shows another value in a result of
another length.

Chosen over dividing volumes by a secret factor: one factor per account keeps the ranking of the
stocks by volume (by which a lookup maps every alias of the bundled US bars, as it does the real
volumes), and a factor per stock, drawn from however wide a range, leaves a stock's level a little
informative where the range ends, and is one more secret to keep. What relative volumes do not
hide is what they keep: like returns, the ratios between a series' bars are a fingerprint for
whoever searches the public data with them (`docs/design.md`, masking).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

from openbell.markets.domain import Bar

SIGNIFICANT_DIGITS: Final = 4


def relative_volumes(bars: Sequence[Bar]) -> tuple[Bar, ...]:
    """`bars` with each volume over the median volume of those that traded (see the module
    docstring)."""
    traded = sorted(bar.volume for bar in bars if bar.volume > 0)
    if not traded:
        return tuple(bars)
    middle = len(traded) // 2
    median = traded[middle] if len(traded) % 2 else (traded[middle - 1] + traded[middle]) / 2
    return tuple(dataclasses.replace(bar, volume=_shown(bar.volume / median)) for bar in bars)


def _shown(ratio: Decimal) -> Decimal:
    """`ratio` to `SIGNIFICANT_DIGITS` significant digits (a whole number when it is larger, so
    it is never written with an exponent)."""
    if ratio == 0:
        return Decimal(0)
    exponent = min(ratio.adjusted() - SIGNIFICANT_DIGITS + 1, 0)
    return ratio.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_EVEN)
