"""Deriving A-share cash dividends from Tushare's reference prices, on real AI-Trader rows.

The rows below are byte-for-byte lines of `81d570b/data/A_stock/daily_prices_sse_50.csv` and
`c8b24a0/data/A_stock/A_stock_data/daily_prices_sse_50.csv` (see tests/resources/ai_trader).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from openbell.markets.corporate_action_files import read_actions
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.ai_trader_actions import build_cn_actions, derive_cn_dividends

HEADER = "ts_code,trade_date,open,high,low,close,pre_close,change,pct_chg,vol,amount\n"
EARLY = (
    "600519.SH,20250625,1439.11,1449.2,1420.51,1435.86,1437.2,-1.34,-0.0932,41050.07,5869292.227\n"
    "600519.SH,20250626,1415.0,1428.0,1410.08,1420.0,1408.26,11.74,0.8337,34860.25,4955829.982\n"
    "600519.SH,20250627,1420.01,1423.0,1403.09,1403.09,1420.0,-16.91,-1.1908,38249.73,5404312.675\n"
    "601088.SH,20250704,40.4,41.18,40.4,41.05,40.4,0.65,1.6089,302940.93,1239186.16\n"
    "601088.SH,20250707,38.79,38.79,37.57,37.7,38.79,-1.09,-2.81,461567.22,1747099.98\n"
)
LATE = (
    "601088.SH,20251107,43.96,44.12,43.46,43.73,43.99,-0.26,-0.591,231889.78,1014468.128\n"
    "601088.SH,20251110,42.9,43.49,42.51,43.15,42.75,0.4,0.9357,221563.37,955100.795\n"
)


def _copy(tmp_path: Path, early: str = EARLY, late: str = LATE) -> Path:
    first = tmp_path / "81d570b" / "data" / "A_stock" / "daily_prices_sse_50.csv"
    second = tmp_path / "c8b24a0" / "data" / "A_stock" / "A_stock_data" / "daily_prices_sse_50.csv"
    for path, body in ((first, early), (second, late)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + body, encoding="utf-8")
    return tmp_path


def test_an_ex_date_is_a_reference_price_below_the_previous_close(tmp_path: Path) -> None:
    source = _copy(tmp_path)
    out = tmp_path / "cn.csv"
    written, skipped = build_cn_actions(source, out)
    # This excerpt jumps from 601088's 07-07 row to its 11-07 one: a reference price above the
    # close four months earlier is counted and skipped, never read as a negative dividend.
    assert (written, skipped) == (3, {"pre_close_above_previous_close": 1})
    actions = read_actions(out, "cn").all
    assert [(a.symbol, a.ex_date, a.cash, a.source) for a in actions] == [
        ("600519.SH", date(2025, 6, 26), Decimal("27.60"), "tushare-pre_close"),
        ("601088.SH", date(2025, 7, 7), Decimal("2.26"), "tushare-pre_close"),
        ("601088.SH", date(2025, 11, 10), Decimal("0.98"), "tushare-pre_close"),
    ]
    assert out.read_text(encoding="utf-8").startswith("# A-share cash dividends")


def test_an_earlier_file_wins_a_repeated_row(tmp_path: Path) -> None:
    repeated = LATE + EARLY.splitlines(keepends=True)[1].replace("1408.26", "1400.00")
    source = _copy(tmp_path, late=repeated)
    dividends, _ = derive_cn_dividends(
        [
            source / "81d570b/data/A_stock/daily_prices_sse_50.csv",
            source / "c8b24a0/data/A_stock/A_stock_data/daily_prices_sse_50.csv",
        ]
    )
    assert dividends[0].cash == Decimal("27.60")


def test_a_drop_too_large_for_a_dividend_is_refused(tmp_path: Path) -> None:
    bonus = EARLY.replace("1420.0,1408.26,11.74", "1420.0,1100.00,11.74")
    with pytest.raises(SourceFormatError, match=r"600519\.SH on 2025-06-26.*bonus issue"):
        build_cn_actions(_copy(tmp_path, early=bonus), tmp_path / "cn.csv")


def test_a_reference_above_the_previous_close_is_counted_not_listed(tmp_path: Path) -> None:
    odd = EARLY.replace("1420.0,1408.26,11.74", "1420.0,1440.00,11.74")
    written, skipped = build_cn_actions(_copy(tmp_path, early=odd, late=""), tmp_path / "cn.csv")
    assert written == 1
    assert skipped == {"pre_close_above_previous_close": 1}
