"""`ops.reports.figures`: how each kind of figure is rounded for a table."""

from __future__ import annotations

from decimal import Decimal

import pytest

from openbell.ops.reports.figures import figure, money, price, quantity, unit


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("final_nav", "10137.98415861479980575045632", "10,137.98"),  # decimal text from a record
        ("final_nav", Decimal("17071931.68043710"), "17,071,931.68"),
        ("initial_cash", "10000", "10,000.00"),
        ("cumulative_return", 0.008000000000000007, "0.80"),
        ("max_drawdown", -0.0019900497512438096, "-0.20"),
        ("annual_volatility", 0.04827875796041554, "4.83"),
        ("cash_ratio", 1.0, "100.00"),
        ("sharpe_ratio", 8.344186366289088, "8.34"),
        ("turnover", 0.0997, "0.10"),
        ("hhi", 1.0, "1.000"),
        ("composite", -0.3234, "-0.323"),
        ("brier_score", 0.04, "0.040"),
        ("cost", "0.000123", "0.0001"),
        ("cost_per_decision", "0.00456", "0.0046"),
        ("periods_per_year", 1512.0, "1512"),
        ("tokens_per_decision", 3456.25, "3456.2"),
        ("trades", 117, "117"),
        ("tokens_estimated", True, "yes"),
        ("sortino_ratio", None, "-"),
        ("cadence", "hourly", "hourly"),
    ],
)
def test_a_record_value_is_rounded_by_its_key(key: str, value: object, shown: str) -> None:
    assert figure(key, value) == shown


def test_money_prices_and_quantities() -> None:
    assert money(Decimal("-1234.565")) == "-1,234.56"  # half-even
    assert money(None) == "-"
    assert price(Decimal(61000)) == "61,000.00"
    assert price(Decimal("0.41432100")) == "0.4143"  # a small coin: 4 significant digits
    assert price(Decimal("0.00001234567")) == "0.00001235"
    assert quantity(Decimal("0.1"), Decimal("0.00001")) == "0.10000"
    assert quantity(Decimal(1200), Decimal(1)) == "1,200"
    assert quantity(Decimal("0.000001"), Decimal("0.00001")) == "0.000001"  # finer: kept exactly


def test_units() -> None:
    assert unit("max_drawdown", "USD") == "%"
    assert unit("final_nav", "CNY") == "CNY"
    assert unit("sharpe_ratio", "USD") == ""
