"""The research tools of a toolbox: news, fundamentals and arithmetic, at one decision time.

This module owns the handlers of `get_news`, `get_fundamentals` and `calculate` (their contract is
in `tools.py`; `Toolbox` serves them beside the market and order tools). News come only through
the point-in-time `GatewayView` and are filtered again here (published at or before `now`, newest
first, capped). Fundamentals come from a `FundamentalsSource` and only reports published at or
before `now` are shown; without a source, or with one that is not point-in-time, the tool refuses
with `not_point_in_time`. `calculate` runs the safe evaluator of `calculator.py`. Every failure is
a structured `ToolError`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from openbell.agents.calculator import CalculationError, evaluate
from openbell.agents.tools import (
    MAX_REPORTS,
    CalculateArgs,
    CalculationOut,
    ErrorCode,
    FundamentalsOut,
    GetFundamentalsArgs,
    GetNewsArgs,
    NewsItemOut,
    NewsOut,
    ReportOut,
    ToolError,
    ToolOutcome,
    unknown_symbol,
)
from openbell.markets.errors import DataUnavailable, NotServed
from openbell.markets.fundamentals import FundamentalsSource
from openbell.markets.gateway import MAX_NEWS, GatewayView

#: How far back `get_fundamentals` looks for reports (about two years of quarterly reports).
FUNDAMENTALS_LOOKBACK: Final = timedelta(days=800)


class ResearchTools:
    """The research handlers of one toolbox; `serves(symbol)` says which symbols it may serve."""

    def __init__(
        self,
        *,
        gateway: GatewayView,
        fundamentals: FundamentalsSource | None,
        serves: Callable[[str], bool],
        now: datetime,
    ) -> None:
        self._gateway = gateway
        self._fundamentals = fundamentals
        self._serves = serves
        self._now = now

    async def get_news(self, args: GetNewsArgs) -> ToolOutcome:
        """News published in the lookback up to `now`, newest first, at most `args.limit`."""
        if args.symbol is not None and not self._serves(args.symbol):
            return unknown_symbol(args.symbol, self._now)
        symbols = None if args.symbol is None else [args.symbol]
        # a query filters titles after the fetch, so fetch the cap and cut afterwards
        limit = MAX_NEWS if args.query is not None else args.limit
        try:
            found = await self._gateway.news(
                symbols, timedelta(hours=args.lookback_hours), limit=limit
            )
        except DataUnavailable as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try again later.")
        needle = args.query.casefold() if args.query is not None else None
        items = [
            item
            for item in found.items
            if item.published_at <= self._now
            and (needle is None or needle in item.title.casefold())
        ]
        items.sort(key=lambda item: item.published_at, reverse=True)
        return NewsOut(
            as_of=self._now,
            items=[
                NewsItemOut(
                    symbol=item.symbol,
                    published_at=item.published_at,
                    title=item.title,
                    source=item.source,
                    url=item.url,
                )
                for item in items[: args.limit]
            ],
        )

    async def get_fundamentals(self, args: GetFundamentalsArgs) -> ToolOutcome:
        """The reports of `args.symbol` published by `now`, newest first; refused when the data
        is not point-in-time."""
        source = self._fundamentals
        if source is None or not source.point_in_time:
            return self._error(
                ErrorCode.NOT_POINT_IN_TIME,
                "Fundamentals are not served here: this data has no point-in-time company "
                "figures, and figures known only later would leak the future.",
                "Decide from prices, quotes and news instead.",
            )
        if not self._serves(args.symbol):
            return unknown_symbol(args.symbol, self._now)
        try:
            found = await source.reports(
                args.symbol,
                self._now - FUNDAMENTALS_LOOKBACK,
                self._now + timedelta(microseconds=1),
                MAX_REPORTS,
            )
        except DataUnavailable as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try again later.")
        except NotServed as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try another symbol.")
        known = [i for i in found if i.symbol == args.symbol and i.published_at <= self._now]
        reports = sorted(known, key=lambda item: item.published_at, reverse=True)[:MAX_REPORTS]
        return FundamentalsOut(
            as_of=self._now,
            symbol=args.symbol,
            reports=[
                ReportOut(
                    period_end=item.period_end,
                    published_at=item.published_at,
                    currency=item.currency,
                    values=dict(item.values),
                )
                for item in reports
            ],
        )

    async def calculate(self, args: CalculateArgs) -> ToolOutcome:
        """The exact value of `args.expression`, or a structured error saying what to fix."""
        try:
            value = evaluate(args.expression)
        except CalculationError as exc:
            return self._error(ErrorCode(exc.code), exc.message, exc.hint)
        return CalculationOut(as_of=self._now, expression=args.expression, value=value)

    def _error(self, code: ErrorCode, message: str, hint: str = "") -> ToolError:
        return ToolError(code=code, message=message, hint=hint, as_of=self._now)
