"""A US hourly report over the bundled bars annualises by the slots the market rang: 252 * 6.

The bundled US hourly bars start at 10:00..15:00 New York, so a replay rings six slots a session
(not the live schedule's seven, 09:30..15:30). The expected figures are computed here from the
bar file itself with empyrical, independently of the report code.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import empyrical
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from openbell.ops.config.schema import load_config
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.wiring.planning import replay_from_config
from openbell.store.db import make_engine

BARS = Path(__file__).parents[2] / "markets" / "data" / "bars" / "us-1h.parquet"
START, END = date(2025, 10, 1), date(2025, 11, 10)  # the demo's US window

CONFIG = """\
[store]
url = "{url}"

[markets.us]
universe = ["AAPL"]
cadence = "hourly"
source = "yfinance"
initial_cash = "10000"
benchmark = "QQQ"

[[agents]]
name = "cash"
kind = "cash"
markets = ["us"]
"""


def qqq_opens() -> tuple[list[datetime], np.ndarray]:
    """The starts and opens of QQQ's hourly bars in the window, read from the Parquet file."""
    table = pq.read_table(BARS)
    table = table.filter(pc.equal(table["symbol"], "QQQ"))
    rows = sorted(
        (row["start_at"], row["open"])
        for row in table.to_pylist()
        if datetime(2025, 10, 1, tzinfo=UTC) <= row["start_at"] < datetime(2025, 11, 11, tzinfo=UTC)
    )
    return [at for at, _ in rows], np.array([float(price) for _, price in rows])


def test_a_us_hourly_leaderboard_annualises_by_six_slots_a_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = tmp_path / "openbell.toml"
    config.write_text(CONFIG.format(url=url), encoding="utf-8")
    replayed = replay_from_config(
        load_config(config), start=START, end=END, market="us", resume=False, show_progress=False
    )
    starts, opens = qqq_opens()
    assert replayed.slots == len(starts) == 29 * 6
    engine = make_engine(url)
    try:
        board = leaderboard(engine, "us")
        found = report(engine, "cash", "us")
    finally:
        engine.dispose()
    assert (board.cadence, board.periods_per_year) == ("hourly", 252.0 * 6)
    assert [point.at for point in found.navs] == starts
    assert [point.at for point in found.benchmark_navs] == starts
    (qqq,) = [row for row in board.rows if row.is_benchmark]
    returns = opens[1:] / opens[:-1] - 1.0
    factor = 252 * 6
    assert qqq.panel.annual_return == pytest.approx(
        empyrical.annual_return(returns, annualization=factor), rel=1e-9
    )
    assert qqq.panel.annual_return == pytest.approx(0.437, abs=0.0005)
    assert qqq.panel.annual_volatility == pytest.approx(
        empyrical.annual_volatility(returns, annualization=factor), rel=1e-9
    )
    assert qqq.panel.sharpe_ratio == pytest.approx(
        empyrical.sharpe_ratio(returns, annualization=factor), rel=1e-9
    )
    assert qqq.panel.sortino_ratio == pytest.approx(
        empyrical.sortino_ratio(returns, annualization=factor), rel=1e-9
    )
    (cash,) = [row for row in board.rows if row.agent == "cash"]
    assert (cash.panel.periods_per_year, cash.final_nav) == (factor, Decimal(10000))
