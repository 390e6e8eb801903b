"""Herculean's behavioural metrics (hold share, switch rate, reactivity, protocol completion) of
planted ledgers, on real SQLite and Postgres, through the leaderboard and the report."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.markets.domain import Bar, Instrument, Order, Side, utc
from openbell.markets.replay_source import ReplaySource
from openbell.ops.reports import exporting
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind, TraceEntry
from openbell_testkit.store import fill_for

SLOTS = tuple(utc(2025, 10, day, 13, 30) for day in (1, 2, 3, 6, 7, 8))
PRICES = (Decimal(100), Decimal(104), Decimal(101), Decimal(99), Decimal(106), Decimal(108))
INITIAL = Decimal(10000)
AAPL = Instrument(symbol="AAPL", market="us", currency="USD")
#: What the trader does at each slot: (side, quantity) fills, and the cycle's status.
PLAN: tuple[tuple[tuple[tuple[Side, int], ...], CycleStatus], ...] = (
    (((Side.BUY, 10),), CycleStatus.DONE),  # enters AAPL: a switch
    ((), CycleStatus.DONE),  # holds
    (((Side.BUY, 5), (Side.SELL, 5)), CycleStatus.DONE),  # a round trip nets out: holds
    (((Side.BUY, 5),), CycleStatus.DONE),  # resizes: neither a hold nor a switch
    (((Side.SELL, 15),), CycleStatus.DONE),  # leaves AAPL: a switch
    ((), CycleStatus.FAILED),  # no decision: not counted
)


def _source() -> ReplaySource:
    bars = [
        Bar(
            symbol="AAPL",
            start_at=at,
            end_at=at + timedelta(hours=6, minutes=30),
            open=price,
            high=price,
            low=price,
            close=price,
            volume=Decimal(1000),
        )
        for at, price in zip(SLOTS, PRICES, strict=True)
    ]
    return ReplaySource(market="us", bars={"1d": bars})


def _claim(ledger: Ledger, account_id: int, at: datetime) -> int:
    cycle = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
    assert cycle is not None
    return cycle


def _plant_trader(ledger: Ledger, now: datetime) -> tuple[int, list[Decimal]]:
    account_id = ledger.open_account(
        ledger.ensure_agent("trader", "random", now), "us", "USD", INITIAL, now
    )
    navs = []
    for at, price, (fills, status) in zip(SLOTS, PRICES, PLAN, strict=True):
        cycle = _claim(ledger, account_id, at)
        for seq, (side, quantity) in enumerate(fills):
            order = Order(instrument=AAPL, side=side, quantity=Decimal(quantity), placed_at=at)
            ledger.record_order(
                cycle_id=cycle, seq=seq, order=order, outcome=fill_for(order, price)
            )
        snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {"AAPL": price})
        navs.append(snapshot.nav)
        ledger.finish_cycle(cycle, status, at)
    return account_id, navs


def _trace(
    cycle: int, at: datetime, role: str, content: str | None, tool: str | None = None
) -> TraceEntry:
    return TraceEntry(cycle_id=cycle, role=role, at=at, content=content, tool=tool)


def _plant_llm(ledger: Ledger, now: datetime) -> None:
    """Five cycles: finished by the model; cut by a budget (the loop's finish); finished over
    MCP (no loop); skipped without a trace; answered in a structured mode, which finished on the
    model's answer. Three of five complete the protocol."""
    account_id = ledger.open_account(
        ledger.ensure_agent("model", "llm", now), "us", "USD", INITIAL, now
    )
    endings: tuple[tuple[TraceEntry, ...] | None, ...] = ()
    for index, at in enumerate(SLOTS[:5]):
        cycle = _claim(ledger, account_id, at)
        endings = (
            (
                _trace(cycle, at, "tool", None, "finish"),
                _trace(cycle, at, "stop", "finished"),
            ),
            (
                _trace(cycle, at, "assistant", "thinking"),
                _trace(cycle, at, "stop", "max_turns"),
                _trace(cycle, at, "tool", "called by openbell", "finish"),
            ),
            (_trace(cycle, at, "tool", "called over MCP", "finish"),),
            None,
            (
                _trace(cycle, at, "assistant", '{"action": "hold"}'),
                _trace(cycle, at, "tool", "called by the mode", "finish"),
                _trace(cycle, at, "stop", "answered"),
            ),
        )
        entries = endings[index]
        if entries is not None:
            ledger.append_journal(cycle, entries)
        ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {})
        status = CycleStatus.SKIPPED if entries is None else CycleStatus.DONE
        ledger.finish_cycle(cycle, status, at, reason="agent_absent" if entries is None else None)


@pytest.fixture
def planted(engine: Engine, ledger: Ledger) -> tuple[Engine, list[Decimal]]:
    now = SLOTS[0] - timedelta(days=1)
    _account_id, navs = _plant_trader(ledger, now)
    _plant_llm(ledger, now)
    return engine, navs


def test_hold_share_and_switch_rate_count_done_cycles(
    planted: tuple[Engine, list[Decimal]],
) -> None:
    engine, _navs = planted
    board = leaderboard(engine, "us", source=_source())
    found = next(row for row in board.rows if row.agent == "trader").behaviour
    assert found is not None
    assert found.hold_share == pytest.approx(2 / 5)
    assert found.switch_rate == pytest.approx(2 / 5)
    assert found.protocol_completion is None  # no trace: the agent does not speak the protocol


def test_weight_reactivity_is_the_pooled_correlation_of_trades_and_past_returns(
    planted: tuple[Engine, list[Decimal]],
) -> None:
    engine, navs = planted
    found = report(engine, "trader", "us", source=_source()).behaviour
    # done cycles after the first: the weight traded against AAPL's return since the last slot
    weights, returns = [], []
    for i in range(1, 5):
        (fills, _status) = PLAN[i]
        signed = sum(
            (Decimal(q) * PRICES[i] * (1 if side is Side.BUY else -1) for side, q in fills),
            Decimal(0),
        )
        weights.append(float(signed / navs[i]))
        returns.append(float(PRICES[i] / PRICES[i - 1] - 1))
    assert found.weight_reactivity == pytest.approx(
        statistics.correlation(weights, returns), rel=1e-12
    )
    assert found.weight_reactivity is not None
    assert found.weight_reactivity < 0  # it bought after a fall and sold after a rise


def test_protocol_completion_reads_the_trace(planted: tuple[Engine, list[Decimal]]) -> None:
    engine, _navs = planted
    rows = {row.agent: row for row in leaderboard(engine, "us", source=_source()).rows}
    model = rows["model"].behaviour
    assert model is not None
    assert model.protocol_completion == pytest.approx(3 / 5)
    assert model.hold_share == pytest.approx(1.0)  # four done cycles, no trade
    assert model.weight_reactivity is None  # it traded nothing
    assert model.reactivity is None
    assert model.persistence is None


def test_a_window_starts_from_the_book_held_before_it(
    planted: tuple[Engine, list[Decimal]],
) -> None:
    engine, _navs = planted
    board = leaderboard(engine, "us", start=SLOTS[3], source=_source())
    found = next(row for row in board.rows if row.agent == "trader").behaviour
    assert found is not None
    # slots 3 (a resize of the 10 bought before the window) and 4 (sells out); 5 failed
    assert found.hold_share == 0.0
    assert found.switch_rate == pytest.approx(1 / 2)


def test_the_records_carry_the_behavioural_metrics(planted: tuple[Engine, list[Decimal]]) -> None:
    engine, _navs = planted
    board = leaderboard(engine, "us", source=_source())
    record = exporting.row_record(next(row for row in board.rows if row.agent == "model"))
    assert record["protocol_completion"] == pytest.approx(0.6)
    assert list(exporting.LEADERBOARD_KEYS).index("hold_share") > list(
        exporting.LEADERBOARD_KEYS
    ).index("cash_ratio")
    found = exporting.report_record(report(engine, "trader", "us", source=_source()))
    assert found["switch_rate"] == pytest.approx(0.4)
