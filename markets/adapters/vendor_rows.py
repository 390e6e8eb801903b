"""Turning a live vendor's rows into `Bar`s: the parsing steps the live adapters share.

This module owns what the akshare, yfinance and ccxt parsers do alike once
they have read a vendor row: `decimal` turns a vendor number into an exact `Decimal` (None for
NaN, None or junk), `make_bar` builds a `Bar` from five numbers and drops, with a warning, one
that is incomplete or that a `Bar` refuses, and `finished_bars` keeps the first bar of each start
that had finished at `now`, oldest first. Which row holds which span stays in each adapter.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from openbell.markets.domain import Bar

Row = TypeVar("Row")
#: A bar's `[start_at, end_at)` in UTC.
Span = tuple[datetime, datetime]


def decimal(value: Any) -> Decimal | None:
    """A vendor number (or numeric text) as an exact Decimal; None for NaN, None, "-" or junk."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def make_bar(
    symbol: str,
    start_at: datetime,
    end_at: datetime,
    numbers: Sequence[Decimal | None],
    *,
    logger: logging.Logger,
    event: str,
    volume_unit: Decimal | None = None,
) -> Bar | None:
    """A `Bar` of open, high, low, close and volume `numbers`; None if one is missing.

    The volume is multiplied by `volume_unit` when given (lots to shares). Values a `Bar` refuses
    are logged as `event` on the adapter's `logger` and give None.
    """
    if any(number is None for number in numbers):
        return None
    o, h, low, c, v = (number for number in numbers if number is not None)
    try:
        return Bar(
            symbol=symbol,
            start_at=start_at,
            end_at=end_at,
            open=o,
            high=h,
            low=low,
            close=c,
            volume=v if volume_unit is None else v * volume_unit,
        )
    except ValueError as exc:
        logger.warning(event, extra={"symbol": symbol, "reason": str(exc)})
        return None


def finished_bars(
    rows: Iterable[tuple[Span | None, Row]],
    now: datetime,
    build: Callable[[datetime, datetime, Row], Bar | None],
) -> tuple[Bar, ...]:
    """The bars `build` makes of `rows` (each a span and its vendor row), oldest first.

    A row without a span, a span that had not ended at `now`, a start already taken by an earlier
    bar (the first is kept) or a row `build` refuses is skipped.
    """
    bars: dict[datetime, Bar] = {}
    for span, row in rows:
        if span is None or span[0] in bars or span[1] > now:
            continue
        bar = build(span[0], span[1], row)
        if bar is not None:
            bars[span[0]] = bar
    return tuple(bars[start] for start in sorted(bars))
