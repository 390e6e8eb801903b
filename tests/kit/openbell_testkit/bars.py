"""Bars for tests: one flat bar (open, high, low and close at one price) of any span."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from openbell.markets.domain import Bar


def flat_bar(
    symbol: str, start_at: datetime, span: timedelta, price: Decimal, volume: Decimal
) -> Bar:
    """The bar of `symbol` over `[start_at, start_at + span)` that traded only at `price`."""
    return Bar(
        symbol=symbol,
        start_at=start_at,
        end_at=start_at + span,
        open=price,
        high=price,
        low=price,
        close=price,
        volume=volume,
    )
