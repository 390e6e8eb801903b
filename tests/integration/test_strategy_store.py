"""Strategies and their runs in the ledger (SQLite, Postgres): stored with their claim, one run
per cycle (a run stored again returns the first), the newest strategy with its run count, and
the concordance of each claim with the account's slot NAV returns."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.strategy_runs import StrategyCode, StrategyRun
from openbell_testkit.store import NOW

DAY = timedelta(days=1)


def _account(ledger: Ledger) -> int:
    agent_id = ledger.ensure_agent("coder", "strategy_code", NOW)
    return ledger.open_account(agent_id, "us", "USD", Decimal("10000.00"), NOW)


def _cycle(ledger: Ledger, account_id: int, day: int) -> int:
    at = NOW + day * DAY
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(hours=1), at)
    assert cycle_id is not None
    return cycle_id


def test_strategies_runs_and_their_concordance(ledger: Ledger) -> None:
    account = _account(ledger)
    cycles = [_cycle(ledger, account, day) for day in range(4)]
    assert ledger.latest_strategy(account) is None
    stored = ledger.save_strategy(
        StrategyCode(
            account_id=account,
            cycle_id=cycles[0],
            written_at=NOW,
            code="def strategy(bars):\n    return {}\n",
            rationale="why",
            claimed_return=Decimal("0.01"),
            claimed_hit_rate=Decimal("0.75"),
            answers=2,
        )
    )
    assert stored.strategy_id is not None
    assert ledger.latest_strategy(account) == (stored, 0)
    outcomes = ["ok", "ok", "error", "ok"]
    for day, (cycle, outcome) in enumerate(zip(cycles, outcomes, strict=True)):
        run = StrategyRun(
            strategy_id=stored.strategy_id,
            cycle_id=cycle,
            ran_at=NOW + day * DAY,
            duration_ms=40 + day,
            outcome=outcome,
            weights={} if outcome != "ok" else {"AAPL": Decimal("0.5")},
            error=None if outcome == "ok" else "ZeroDivisionError: division by zero",
        )
        assert ledger.record_strategy_run(run) == run
        # A cycle run again gets the stored run back, not a second one.
        again = StrategyRun(
            strategy_id=stored.strategy_id,
            cycle_id=cycle,
            ran_at=NOW + day * DAY,
            duration_ms=1,
            outcome="timeout",
        )
        assert ledger.record_strategy_run(again) == run
    assert ledger.latest_strategy(account) == (stored, 4)
    other = ledger.open_account(
        ledger.ensure_agent("other", "cash", NOW), "us", "USD", Decimal(1), NOW
    )
    foreign = _cycle(ledger, other, 0)
    with pytest.raises(ValueError, match="not of one account"):
        ledger.record_strategy_run(
            StrategyRun(
                strategy_id=stored.strategy_id,
                cycle_id=foreign,
                ran_at=NOW,
                duration_ms=1,
                outcome="ok",
            )
        )
    first = ledger.strategy_run(cycles[0])
    assert first is not None
    assert first.weights == {"AAPL": Decimal("0.5")}
    # NAV: 10000 -> 10100 (+1%) -> 9999 (-1%) -> 10200 -> 10200: runs 0 and 1 have a next slot.
    for day, cash in enumerate(["10000", "10100", "9999", "10200"]):
        _set_cash(ledger, account, Decimal(cash))
        ledger.write_nav_snapshot(account, NOW + day * DAY, SnapshotKind.SLOT, {})
    (gap,) = ledger.strategy_concordance(account)
    assert (gap.runs, gap.failed_runs, gap.periods) == (4, 1, 2)
    assert gap.realised_return == pytest.approx((0.01 + (9999 / 10100 - 1)) / 2)
    assert gap.realised_hit_rate == 0.5
    assert gap.hit_rate_gap == pytest.approx(0.25)
    assert gap.return_gap == pytest.approx(0.01 - gap.realised_return)


def _set_cash(ledger: Ledger, account_id: int, cash: Decimal) -> None:
    from sqlalchemy import update

    from openbell.store.tables import AccountRow

    with ledger._engine.begin() as connection:  # a test's shortcut: no fills needed for NAV
        connection.execute(update(AccountRow).where(AccountRow.id == account_id).values(cash=cash))
