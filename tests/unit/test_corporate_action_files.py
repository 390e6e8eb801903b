"""The corporate-actions file: exact decimals, ex-dates become the session open, bad rows are named
by file and row, and the bundled A-share file loads."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from openbell.markets.corporate_action_files import bundled_actions, parse_actions, read_actions
from openbell.markets.corporate_actions import ActionKind
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError

HEADER = "symbol,ex_date,kind,ratio,cash,source\n"


def test_rows_become_actions_at_the_ex_dates_session_open(tmp_path: Path) -> None:
    path = tmp_path / "us.csv"
    path.write_text(
        "# AAPL's 2020 split and a dividend\n"
        + HEADER
        + "AAPL,2020-08-31,split,4,,yahoo\n"
        + "AAPL,2020-08-07,cash_dividend,,0.82,yahoo\n",
        encoding="utf-8",
    )
    source = read_actions(path, "us")
    dividend, split = source.all
    assert (split.kind, split.ratio, split.ex_at) == (
        ActionKind.SPLIT,
        Decimal(4),
        utc(2020, 8, 31, 13, 30),
    )
    assert (dividend.cash, dividend.currency, dividend.source) == (Decimal("0.82"), "USD", "yahoo")
    assert source.name == f"file:{path}"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("AAPL,2020-13-01,split,4,,x", "row 2: ex_date '2020-13-01' is not YYYY-MM-DD"),
        ("AAPL,2020-08-30,split,4,,x", "row 2: ex_date 2020-08-30 is not a XNYS session"),
        ("AAPL,2020-08-31,merger,4,,x", "row 2: kind 'merger' is not one of"),
        ("AAPL,2020-08-31,split,four,,x", "row 2: ratio 'four' is not a decimal number"),
        ("AAPL,2020-08-31,cash_dividend,,,x", "row 2: dividend of AAPL"),
        ("AAPL,2020-08-31,split,4", "row 2: expected 6 fields"),
    ],
)
def test_a_bad_row_is_named_by_file_and_row(row: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_actions(HEADER + row + "\n", "us", origin="test.csv")


def test_a_wrong_header_or_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the header must be symbol,ex_date,kind,ratio,cash"):
        parse_actions("symbol,date\nAAPL,2020-08-31\n", "us", origin="test.csv")
    with pytest.raises(ConfigError, match="cannot read corporate actions file"):
        read_actions(tmp_path / "absent.csv", "us")


def test_the_bundled_a_share_dividends_load_in_cny() -> None:
    source = bundled_actions("cn")
    assert source is not None
    assert len(source.all) == 76
    assert {action.kind for action in source.all} == {ActionKind.CASH_DIVIDEND}
    assert {action.currency for action in source.all} == {"CNY"}
    found = asyncio.run(source.actions(["601088.SH"], date(2025, 7, 1), date(2025, 12, 31)))
    assert [(a.ex_date, a.cash) for a in found] == [
        (date(2025, 7, 7), Decimal("2.26")),
        (date(2025, 11, 10), Decimal("0.98")),
    ]
    assert found[0].ex_at == utc(2025, 7, 7, 1, 30)  # 09:30 Shanghai
    assert bundled_actions("us") is None
