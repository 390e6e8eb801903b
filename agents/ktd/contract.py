"""The contract of KTD-Fin's six research tools: names, descriptions, arguments and results.

This module owns what the `ktd-fin` decision mode's model may ask for in its research phase, named
as the paper names them (`get_market_context`, `screen_candidates`, `get_stock_snapshot`,
`compare_candidates`, `risk_check`; the paper prints no name for its portfolio tool, which is
`get_portfolio_state` here) and how each answers: every result is a `ToolResult` stamped `as_of`,
with the market-local `as_of_date` and the `data_cutoff` (the day of the last daily bar used: the
previous session at an open), stocks named `stock_id` with their `board`, `limit_pct`, `limit_up`
and `limit_down` and limit-hit warnings, as the paper's tools expose them. Every amount of money in
a result (closes, limit prices, values, cash, estimated notionals and fees) is listed by its
model's `in_unit`, which price rebasing (`agents/rebasing.py`) uses to show it in an account's
secret unit; no result holds a real volume (only the scale-free `volume_ratio`). The handlers are
in `research.py` and `risk.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Annotated, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openbell.agents.tools import MAX_ORDER_SHARES, Fraction, Symbol, ToolResult

#: Shows an amount of money in the model's terms (identity, or an account's rebased unit).
Show = Callable[[Decimal], Decimal]

MAX_TOP_K: Final = 50
MAX_COMPARED: Final = 10
MAX_SNAPSHOT_BARS: Final = 60
MAX_CHECKED_ORDERS: Final = 50
SORT_KEYS: Final = ("momentum_vol", "ret_20d", "ret_5d", "ret_1d", "vol_20d", "volume_ratio")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GetMarketContextArgs(_Args):
    """`get_market_context` takes no arguments."""


class ScreenCandidatesArgs(_Args):
    """Arguments of `screen_candidates`."""

    sort_by: Literal["momentum_vol", "ret_20d", "ret_5d", "ret_1d", "vol_20d", "volume_ratio"] = (
        "momentum_vol"
    )
    top_k: int = Field(10, ge=1, le=MAX_TOP_K)
    ascending: bool = False
    exclude_limit_up: bool = Field(True, description="Leave out stocks that closed at limit-up.")


class GetStockSnapshotArgs(_Args):
    """Arguments of `get_stock_snapshot`."""

    stock_id: Symbol
    lookback: int = Field(20, ge=1, le=MAX_SNAPSHOT_BARS, description="Daily bars to show.")


class CompareCandidatesArgs(_Args):
    """Arguments of `compare_candidates`."""

    stock_ids: list[Symbol] = Field(min_length=2, max_length=MAX_COMPARED)


class GetPortfolioStateArgs(_Args):
    """`get_portfolio_state` takes no arguments."""


class RiskOrder(BaseModel):
    """One order of a `risk_check`: as it would be submitted (`confidence` and `reason` may be
    given and are not checked here), `side` BUY or SELL in any case."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stock_id: Symbol
    side: Literal["buy", "sell"]
    target_weight: Fraction | None = None
    shares: Annotated[Decimal, Field(gt=0, le=MAX_ORDER_SHARES, allow_inf_nan=False)] | None = None
    confidence: Fraction | None = None
    reason: str | None = Field(None, max_length=2000)

    @field_validator("side", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        if (self.shares is None) == (self.target_weight is None):
            raise ValueError("give exactly one of shares and target_weight")
        return self


class RiskCheckArgs(_Args):
    """Arguments of `risk_check`: the orders, in the order they would be submitted."""

    orders: list[RiskOrder] = Field(min_length=1, max_length=MAX_CHECKED_ORDERS)


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True)


class StockRow(_Row):
    """One stock's features at the data cutoff and its limit band for the next session."""

    stock_id: str
    board: str | None
    limit_pct: Decimal | None
    limit_up: Decimal | None
    limit_down: Decimal | None
    last_close: Decimal
    ret_1d: Decimal | None
    ret_5d: Decimal | None
    ret_20d: Decimal | None
    vol_20d: Decimal | None
    momentum_vol: Decimal | None
    volume_ratio: Decimal | None
    high_20d_gap: Decimal | None
    warnings: list[str] = Field(default_factory=list)

    def in_unit(self, show: Show) -> StockRow:
        """This row with its prices shown by `show`."""
        return self.model_copy(
            update={
                "last_close": show(self.last_close),
                "limit_up": _shown(show, self.limit_up),
                "limit_down": _shown(show, self.limit_down),
            }
        )


class BenchmarkRow(_Row):
    """The benchmark's returns and volatility (its level is not shown: it is a price)."""

    stock_id: str
    ret_1d: Decimal | None
    ret_5d: Decimal | None
    ret_20d: Decimal | None
    vol_20d: Decimal | None


class MarketContextOut(ToolResult):
    """The market at the data cutoff: the benchmark and the breadth of today's universe."""

    as_of_date: date
    data_cutoff: date | None
    universe_size: int
    stocks_with_data: int
    benchmark: BenchmarkRow | None
    advancers: int
    decliners: int
    unchanged: int
    median_ret_1d: Decimal | None
    median_ret_5d: Decimal | None
    median_ret_20d: Decimal | None
    median_vol_20d: Decimal | None
    limit_up_closes: int
    limit_down_closes: int

    def in_unit(self, show: Show) -> MarketContextOut:
        """This result (it holds no money)."""
        return self


class ScreenOut(ToolResult):
    """The universe's top `top_k` by `sort_by` (stocks without it left out)."""

    as_of_date: date
    data_cutoff: date | None
    sort_by: str
    ascending: bool
    screened: int
    excluded_limit_up: int
    candidates: list[StockRow]

    def in_unit(self, show: Show) -> ScreenOut:
        """This result with its rows' prices shown by `show`."""
        return self.model_copy(update={"candidates": [r.in_unit(show) for r in self.candidates]})


class BarRow(_Row):
    """One daily bar, its volume relative to the median of the bars shown (1: the median)."""

    date: date
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    volume_ratio: Decimal

    def in_unit(self, show: Show) -> BarRow:
        """This bar with its prices shown by `show`."""
        return self.model_copy(
            update={
                "open": show(self.open),
                "high": show(self.high),
                "low": show(self.low),
                "close": show(self.close),
            }
        )


class HeldRow(_Row):
    """What the account holds of a stock: shares, those sellable today (T+1), weight of NAV."""

    shares: Decimal
    shares_available: Decimal
    weight: Decimal


class SnapshotOut(ToolResult):
    """One stock: its features, limit band, recent daily bars and the account's holding."""

    as_of_date: date
    data_cutoff: date
    stock: StockRow
    bars: list[BarRow]
    held: HeldRow | None

    def in_unit(self, show: Show) -> SnapshotOut:
        """This result with its prices shown by `show`."""
        return self.model_copy(
            update={"stock": self.stock.in_unit(show), "bars": [b.in_unit(show) for b in self.bars]}
        )


class PairRow(_Row):
    """The correlation of two stocks' daily returns over the last 20 sessions."""

    a: str
    b: str
    corr_20d: Decimal | None


class CompareOut(ToolResult):
    """Stocks side by side, with their pairwise return correlations; `unknown` are not served,
    `no_data` had no daily bar."""

    as_of_date: date
    data_cutoff: date | None
    stocks: list[StockRow]
    correlations: list[PairRow]
    unknown: list[str] = Field(default_factory=list)
    no_data: list[str] = Field(default_factory=list)

    def in_unit(self, show: Show) -> CompareOut:
        """This result with its rows' prices shown by `show`."""
        return self.model_copy(update={"stocks": [r.in_unit(show) for r in self.stocks]})


class PositionRow(_Row):
    """A holding valued at its last close."""

    stock_id: str
    board: str | None
    shares: Decimal
    shares_available: Decimal
    last_close: Decimal
    value: Decimal
    weight: Decimal

    def in_unit(self, show: Show) -> PositionRow:
        """This holding with its money shown by `show`."""
        return self.model_copy(
            update={"last_close": show(self.last_close), "value": show(self.value)}
        )


class PortfolioStateOut(ToolResult):
    """The account valued at the last closes: total value, cash and its weight, holdings (largest
    weight first) with the shares sellable today, and their concentration (HHI of weights)."""

    as_of_date: date
    currency: str
    total_value: Decimal
    cash: Decimal
    cash_weight: Decimal
    num_positions: int
    hhi: Decimal
    positions: list[PositionRow]

    def in_unit(self, show: Show) -> PortfolioStateOut:
        """This result with its money shown by `show`."""
        return self.model_copy(
            update={
                "total_value": show(self.total_value),
                "cash": show(self.cash),
                "positions": [p.in_unit(show) for p in self.positions],
            }
        )


class CheckRow(_Row):
    """One order as the engine would likely take it at the last close: the shares it comes to,
    its estimated price, notional and fees, what would refuse it (`issues`) and what to watch."""

    stock_id: str
    side: str
    ok: bool
    est_shares: Decimal
    est_price: Decimal | None
    est_notional: Decimal | None
    est_fees: Decimal | None
    issues: list[str]
    warnings: list[str]

    def in_unit(self, show: Show) -> CheckRow:
        """This check with its money shown by `show`."""
        return self.model_copy(
            update={
                "est_price": _shown(show, self.est_price),
                "est_notional": _shown(show, self.est_notional),
                "est_fees": _shown(show, self.est_fees),
            }
        )


class RiskCheckOut(ToolResult):
    """The orders checked in sequence against the account at the last closes, and the account
    after those that pass."""

    as_of_date: date
    passed: bool
    checks: list[CheckRow]
    cash_after: Decimal
    cash_weight_after: Decimal
    max_weight_after: Decimal
    hhi_after: Decimal

    def in_unit(self, show: Show) -> RiskCheckOut:
        """This result with its money shown by `show`."""
        return self.model_copy(
            update={
                "checks": [c.in_unit(show) for c in self.checks],
                "cash_after": show(self.cash_after),
            }
        )


def _shown(show: Show, amount: Decimal | None) -> Decimal | None:
    return None if amount is None else show(amount)


#: The six tools, in the paper's order: name -> (argument model, result model, description).
KTD_TOOLS: Final[dict[str, tuple[type[BaseModel], type[ToolResult], str]]] = {
    "get_market_context": (
        GetMarketContextArgs,
        MarketContextOut,
        "The market at the data cutoff: benchmark returns and the universe's breadth.",
    ),
    "screen_candidates": (
        ScreenCandidatesArgs,
        ScreenOut,
        "Rank today's universe by a feature (momentum_vol = ret_20d / vol_20d).",
    ),
    "get_stock_snapshot": (
        GetStockSnapshotArgs,
        SnapshotOut,
        "One stock: features, board and limit band, recent daily bars, your holding.",
    ),
    "compare_candidates": (
        CompareCandidatesArgs,
        CompareOut,
        "Stocks side by side, with pairwise 20-day return correlations.",
    ),
    "get_portfolio_state": (
        GetPortfolioStateArgs,
        PortfolioStateOut,
        "Your cash, holdings (with shares_available today, T+1) and weights at the last closes.",
    ),
    "risk_check": (
        RiskCheckArgs,
        RiskCheckOut,
        "Check planned orders (in order) against lots, T+1, cash and limits; places nothing.",
    ),
}
#: The result model of each tool, by name (masking reads results back into them).
KTD_RESULTS: Final[dict[str, type[ToolResult]]] = {
    name: result for name, (_, result, _) in KTD_TOOLS.items()
}
