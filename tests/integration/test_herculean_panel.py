"""Herculean's panel (Appendix H.2) of a planted ledger, on real SQLite and Postgres, against values
worked out by hand in this file (and scipy's `spearmanr` where it is installed): reactivity against
the trailing 5-period and the next return, persistence and revision rate, for a trader (action
codes from its fills) and a rating agent (its ratings' exposures), and a rating agent's protocol
completion (its reports count; today's 0.00% was the bug)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.agents.rating.agent import RATINGS_TOOL
from openbell.markets.domain import Bar, Instrument, Order, Side, utc
from openbell.markets.replay_source import ReplaySource
from openbell.ops.reports import exporting
from openbell.ops.reports.market_reports import Behaviour, leaderboard, report
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind, TraceEntry
from openbell_testkit.store import fill_for

SLOTS = tuple(utc(2025, 10, 1, 13, 30) + timedelta(days=day) for day in range(10))
PRICES = {
    "AAPL": (100, 102, 101, 103, 106, 104, 108, 107, 111, 110),
    "MSFT": (200, 198, 199, 201, 203, 205, 204, 206, 209, 207),
}
INITIAL = Decimal(100000)
#: The trader's net trade per slot and symbol (shares; + buys, - sells): its action codes are
#: AAPL (1, 0, 1, 0, -1, 1, 0, -1, 1, 0) and MSFT (1, 0, 0, 0, 0, 0, 0, 0, 0, -1).
TRADES = {
    "AAPL": (10, 0, 5, 0, -5, 5, 0, -5, 5, 0),
    "MSFT": (4, 0, 0, 0, 0, 0, 0, 0, 0, -4),
}
#: The rating agent's ratings per slot; its cycle at slot 4 failed without a report.
RATINGS = {
    "AAPL": (
        "buy",
        "buy",
        "strong_buy",
        "hold",
        None,
        "sell",
        "sell",
        "strong_sell",
        "hold",
        "buy",
    ),
    "MSFT": ("hold", "hold", "hold", "hold", None, "hold", "hold", "hold", "hold", "hold"),
}


def _source() -> ReplaySource:
    bars = [
        Bar(
            symbol=symbol,
            start_at=at,
            end_at=at + timedelta(hours=6, minutes=30),
            open=Decimal(price),
            high=Decimal(price),
            low=Decimal(price),
            close=Decimal(price),
            volume=Decimal(1000),
        )
        for symbol, prices in PRICES.items()
        for at, price in zip(SLOTS, prices, strict=True)
    ]
    return ReplaySource(market="us", bars={"1d": bars})


def _marks(index: int) -> dict[str, Decimal]:
    return {symbol: Decimal(prices[index]) for symbol, prices in PRICES.items()}


def _claim(ledger: Ledger, account_id: int, at: datetime) -> int:
    cycle = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
    assert cycle is not None
    return cycle


def _plant_trader(ledger: Ledger, now: datetime) -> None:
    account_id = ledger.open_account(
        ledger.ensure_agent("trader", "random", now), "us", "USD", INITIAL, now
    )
    for index, at in enumerate(SLOTS):
        cycle = _claim(ledger, account_id, at)
        seq = 0
        for symbol, shares in TRADES.items():
            if shares[index] == 0:
                continue
            side = Side.BUY if shares[index] > 0 else Side.SELL
            order = Order(
                instrument=Instrument(symbol=symbol, market="us", currency="USD"),
                side=side,
                quantity=Decimal(abs(shares[index])),
                placed_at=at,
            )
            price = Decimal(PRICES[symbol][index])
            ledger.record_order(
                cycle_id=cycle, seq=seq, order=order, outcome=fill_for(order, price)
            )
            seq += 1
        ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, _marks(index))
        ledger.finish_cycle(cycle, CycleStatus.DONE, at)


def _plant_rater(ledger: Ledger, now: datetime) -> None:
    account_id = ledger.open_account(
        ledger.ensure_agent("analyst", "rating", now), "us", "USD", INITIAL, now
    )
    for index, at in enumerate(SLOTS):
        cycle = _claim(ledger, account_id, at)
        rated = {symbol: found[index] for symbol, found in RATINGS.items()}
        entries = [TraceEntry(cycle_id=cycle, role="user", at=at, content="closes ...")]
        if all(rating is not None for rating in rated.values()):
            report_text = json.dumps(
                {
                    "ratings": [
                        {
                            "symbol": symbol,
                            "rating": rating,
                            "confidence": "0.5",
                            "weight": "0",
                            "rationale": "planted",
                        }
                        for symbol, rating in sorted(rated.items())
                    ]
                }
            )
            entries.append(
                TraceEntry(
                    cycle_id=cycle, role="tool", at=at, tool=RATINGS_TOOL, result=report_text
                )
            )
        ledger.append_journal(cycle, entries)
        ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {})
        status = CycleStatus.FAILED if rated["AAPL"] is None else CycleStatus.DONE
        ledger.finish_cycle(cycle, status, at)


@pytest.fixture
def panel(engine: Engine, ledger: Ledger) -> dict[str, Behaviour]:
    now = SLOTS[0] - timedelta(days=1)
    _plant_trader(ledger, now)
    _plant_rater(ledger, now)
    board = leaderboard(engine, "us", source=_source())
    return {row.name: row.behaviour for row in board.rows if row.behaviour is not None}


def _spearman_by_scipy(codes: list[float], returns: list[float]) -> float:
    stats = pytest.importorskip("scipy.stats")
    return float(stats.spearmanr(codes, returns).statistic)


def test_a_traders_reactivity_against_the_trailing_return(panel: dict[str, Behaviour]) -> None:
    # Trailing 5-period returns exist from slot 5 on: AAPL 104/100, 108/102, 107/101, 111/103,
    # 110/106 - 1 = (.0400, .0588, .0594, .0777, .0377), ranks (2, 3, 4, 5, 1); its codes there
    # (1, 0, -1, 1, 0) rank (4.5, 2.5, 1, 4.5, 2.5). Centred: codes (1.5, -.5, -2, 1.5, -.5),
    # returns (-1, 0, 1, 2, -2): covariance 0.5, squares 9 and 10: rho = 0.5 / sqrt(90).
    aapl = 0.5 / math.sqrt(90)
    # MSFT 205/200, 204/198, 206/199, 209/201, 207/203 - 1 = (.0250, .0303, .0352, .0398, .0197),
    # ranks (2, 3, 4, 5, 1); codes (0, 0, 0, 0, -1) rank (3.5, 3.5, 3.5, 3.5, 1). Centred: codes
    # (.5, .5, .5, .5, -2), returns (-1, 0, 1, 2, -2): covariance 5, squares 5 and 10.
    msft = 5 / math.sqrt(50)
    assert panel["trader"].reactivity == pytest.approx((aapl + msft) / 2, rel=1e-12)
    assert aapl == pytest.approx(
        _spearman_by_scipy([1, 0, -1, 1, 0], [0.04, 6 / 102, 6 / 101, 8 / 103, 4 / 106])
    )


def test_a_traders_reactivity_against_the_next_return(panel: dict[str, Behaviour]) -> None:
    codes = {"AAPL": [1, 0, 1, 0, -1, 1, 0, -1, 1], "MSFT": [1, 0, 0, 0, 0, 0, 0, 0, 0]}
    expected = [
        _spearman_by_scipy(
            [float(code) for code in found],
            [PRICES[symbol][k + 1] / PRICES[symbol][k] - 1 for k in range(9)],
        )
        for symbol, found in codes.items()
    ]
    assert panel["trader"].reactivity_next == pytest.approx(sum(expected) / 2, rel=1e-12)


def test_a_traders_persistence(panel: dict[str, Behaviour]) -> None:
    # AAPL's codes move 1, 1, 1, 1, 2, 1, 1, 2, 1 = 11 over 9 pairs and a range of 2: turnover
    # 11/18, persistence 7/18. MSFT's move 1 twice: 1 - 2/18 = 16/18.
    assert panel["trader"].persistence == pytest.approx((7 / 18 + 16 / 18) / 2, rel=1e-12)
    assert panel["trader"].revision_rate is None  # no ratings
    assert panel["trader"].protocol_completion is None  # a rule baseline's kind


def test_a_rating_agents_panel_reads_its_ratings(panel: dict[str, Behaviour]) -> None:
    found = panel["analyst"]
    # AAPL's exposures (.5, .5, 1, 0, 0 (no report), -.5, -.5, -1, 0, .5) move 0, .5, 1, 0, .5, 0,
    # .5, 1, .5 = 4: persistence 1 - 4/18 = 7/9; MSFT's never move: 1.
    assert found.persistence == pytest.approx((7 / 9 + 1.0) / 2, rel=1e-12)
    # AAPL: of the pairs of consecutive reports (the failed slot 4 pairs with neither neighbour),
    # (buy, buy) (buy, strong_buy) (strong_buy, hold) (sell, sell) (sell, strong_sell)
    # (strong_sell, hold) (hold, buy): 5 of 7 differ. MSFT: 0 of 7.
    assert found.revision_rate == pytest.approx((5 / 7 + 0.0) / 2, rel=1e-12)
    # Trailing reactivity: AAPL's exposures from slot 5, (-.5, -.5, -1, 0, .5), rank
    # (2.5, 2.5, 1, 4, 5), centred (-.5, -.5, -2, 1, 2) against the returns' (-1, 0, 1, 2, -2):
    # covariance -3.5, squares 9.5 and 10. MSFT's hold everywhere: undefined, left out.
    assert found.reactivity == pytest.approx(-3.5 / math.sqrt(95), rel=1e-12)
    # 9 of its 10 cycles stored a report (the tenth failed); it never called `finish`.
    assert found.protocol_completion == pytest.approx(0.9)


def test_the_panel_is_in_the_records_and_the_report(engine: Engine, ledger: Ledger) -> None:
    now = SLOTS[0] - timedelta(days=1)
    _plant_rater(ledger, now)
    record = exporting.report_record(report(engine, "analyst", "us", source=_source()))
    assert record["revision_rate"] == pytest.approx(5 / 14)
    assert record["protocol_completion"] == pytest.approx(0.9)
    keys = list(exporting.LEADERBOARD_KEYS)
    panel = ["reactivity", "reactivity_next", "persistence", "revision_rate", "weight_reactivity"]
    assert all(key in keys for key in panel)
