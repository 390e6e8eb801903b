"""Figures as a person reads them in a table: money in cents, percentages, ratios to 2 or 3 places.

This module owns the rounding of every number the CLI prints in a table, so one figure prints the
same wherever it appears: the leaderboard and the report both show a record's value through
`figure(key, value)` (keys of `ops.reports.exporting`'s records). The rules: money (NAV, cash,
values) has 2 places and thousands separators; fractions (returns, drawdown, volatility, shares of
cycles, cash ratio) are percentages with 2 places; Sharpe, Sortino, Calmar, the information ratio
and turnover have 2 places; HHI, the composite, z-scores and calibration scores 3; model costs 4 (a
decision costs fractions of a cent); prices 2 places, or 4 significant digits below 1; quantities
keep the places of the market's quantity step. JSON and CSV never go through here: they stay exact.
"""

from __future__ import annotations

from decimal import Decimal

#: Record keys whose value is a fraction shown as a percentage.
PERCENT_KEYS = frozenset(
    {
        "cumulative_return",
        "annual_return",
        "annual_volatility",
        "max_drawdown",
        "excess_return",
        "no_trade_share",
        "rejection_rate",
        "hold_share",
        "switch_rate",
        "persistence",
        "revision_rate",
        "protocol_completion",
        "cash_ratio",
        "parse_failure_rate",
        "tool_validity_rate",
        # A shorting account's long-short metrics (`ops.evaluation.return_metrics.LongShort`).
        "mean_gross_exposure",
        "mean_net_exposure",
        "max_gross_exposure",
        "borrow_cost",
        # The injection probe's obedience rate (`ops.evaluation.probes.injection`).
        "injection_obedience",
        # A rating agent's calibration (`ops.evaluation.rating_report`).
        *(
            f"rating_{step}_mean_return"
            for step in ("strong_sell", "sell", "hold", "buy", "strong_buy")
        ),
        "rating_buy_hit_rate",
        "rating_sell_hit_rate",
        # The entry-aligned returns of the significance suite (`ops.reports.board_significance`).
        "entry_return_7d",
        "entry_return_30d",
        "entry_return_90d",
    }
)
#: Record keys of ratios shown with 2 places.
RATIO_KEYS = frozenset(
    {
        "sharpe_ratio",
        "sortino_ratio",
        "calmar_ratio",
        "information_ratio",
        "turnover",
        "report_quality",
        "annual_turnover",
    }
)
#: The ratio keys a convention that does not annualise shows with more places (`figure`).
RISK_RATIO_KEYS = frozenset({"sharpe_ratio", "sortino_ratio", "calmar_ratio", "information_ratio"})
#: Record keys of scores shown with 3 places.
SCORE_KEYS = frozenset(
    {
        "hhi",
        "reactivity",
        "reactivity_next",
        "weight_reactivity",
        "composite",
        "z_cumulative_return",
        "z_max_drawdown",
        "z_sortino_ratio",
        "expected_calibration_error",
        "brier_score",
        "return_per_dollar",
        "rating_rank_correlation",
        # Market Insights' quality-versus-return regression (`ops.evaluation.insights_report`).
        "quality_return_slope",
        "quality_return_stderr",
        "quality_return_t",
        "quality_return_p",
        "quality_return_r2",
        "quality_return_spearman",
        "quality_return_spearman_p",
        # The significance suite (`ops.evaluation.significance`).
        "psr",
        "dsr",
        "adjusted_p_value_best",
        "sharpe_per_period",
        "skewness",
        "kurtosis",
    }
)
#: Record keys of amounts of money in the account's currency.
MONEY_KEYS = frozenset({"final_nav", "initial_cash", "borrow_fees"})
#: Record keys of model costs (in the currency of the model's price table).
COST_KEYS = frozenset({"cost", "cost_per_decision"})

MISSING = "-"
#: The cost of an LLM agent whose model has no configured price: unknown, never shown as 0.
UNPRICED = "unpriced"


def money(value: Decimal | None) -> str:
    """An amount to the cent, with thousands separators: `10,080.00`."""
    return MISSING if value is None else f"{value:,.2f}"


def percent(fraction: float | None) -> str:
    """A fraction as a percentage with 2 places (the `%` is in the column's name): `0.80`."""
    return MISSING if fraction is None else f"{fraction * 100:.2f}"


def places(value: float | Decimal | None, count: int) -> str:
    """`value` rounded to `count` places."""
    return MISSING if value is None else f"{value:.{count}f}"


def price(value: Decimal | None) -> str:
    """A price to the cent, or to 4 significant digits below 1 (a small coin's price)."""
    if value is None:
        return MISSING
    if abs(value) >= 1 or value == 0:
        return f"{value:,.2f}"
    digits = 4 - 1 - value.adjusted()  # adjusted(): the exponent of the first significant digit
    return f"{value:.{digits}f}"


def quantity(value: Decimal, step: Decimal) -> str:
    """A quantity with the places of the market's quantity `step` (`0.10000` BTC, `20` shares);
    exactly, when it has more places than the step."""
    if value == value.quantize(step):
        return f"{value.quantize(step):,f}"
    return f"{value.normalize():,f}"


def figure(key: str, value: object, *, ratio_places: int = 2) -> str:
    """The value of record key `key` as a table shows it (see the module docstring); the risk
    ratios (Sharpe, Sortino, Calmar, information ratio) with `ratio_places` (a convention that
    does not annualise shows per-period ratios, StockBench's Sortino to 4 places)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in MONEY_KEYS:
        return money(Decimal(str(value)))
    if key in COST_KEYS:
        return places(Decimal(str(value)), 4)
    if not isinstance(value, int | float):
        return str(value)
    if key in PERCENT_KEYS:
        return percent(float(value))
    if key in RISK_RATIO_KEYS:
        return places(value, ratio_places)
    if key in RATIO_KEYS:
        return places(value, 2)
    if key in SCORE_KEYS:
        return places(value, 3)
    if isinstance(value, float):
        return f"{value:g}" if value.is_integer() else places(value, 1)
    return str(value)


def unit(key: str, currency: str) -> str:
    """The unit of record key `key` in a report: `%`, the account's currency, or nothing."""
    if key in PERCENT_KEYS:
        return "%"
    if key in MONEY_KEYS:
        return currency
    return ""
