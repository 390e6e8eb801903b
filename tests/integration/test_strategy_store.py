"""Strategies and their runs in the ledger (SQLite, Postgres): stored with their claim, one run
per cycle (a run stored again returns the first), the newest strategy with its run count, the
concordance of each claim with the account's slot NAV returns, and the judges' verdicts (one per
strategy and judge model)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell.store.strategy_judgements import StrategyJudgement
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
            weights={} if outcome != "ok" else {"AAPL": Decimal("0.5") + day // 3},
            error=None if outcome == "ok" else "ZeroDivisionError: division by zero",
            offered=("AAPL", "MSFT"),
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
    # What the FIDES gaps read: the periods' spans and returns, the first run's universe, and
    # the valid runs' weight sets (0.5, 0.5 and 1.5: two different), all of them invested.
    assert gap.spans == ((NOW, NOW + DAY), (NOW + DAY, NOW + 2 * DAY))
    assert gap.returns == pytest.approx((0.01, 9999 / 10100 - 1))
    assert gap.offered == ("AAPL", "MSFT")
    assert (gap.distinct_weights, gap.invested_runs) == (2, 3)


def test_verdicts_are_kept_per_judge_model_and_replaced_by_the_same_model(ledger: Ledger) -> None:
    account = _account(ledger)
    cycle = _cycle(ledger, account, 0)
    stored = [
        ledger.save_strategy(
            StrategyCode(
                account_id=account, cycle_id=cycle, written_at=NOW, code=code, rationale="why"
            )
        )
        for code in ("def strategy(bars):\n    return {}\n", "def strategy(bars):\n    return {}")
    ]
    first, second = (s.strategy_id for s in stored)
    assert first is not None
    assert second is not None
    assert ledger.judgements([first, second]) == {first: [], second: []}

    def verdict(strategy_id: int, model: str, exits: int, day: int) -> StrategyJudgement:
        return StrategyJudgement(
            strategy_id=strategy_id, judge_model=model, judged_at=NOW + day * DAY, direction=1,
            indicators=1, exits=exits, no_extra_rule=1, rationale=f"{model} on day {day}",
        )  # fmt: skip

    a = ledger.save_judgement(verdict(first, "judge-a", 0, 1))
    b = ledger.save_judgement(verdict(first, "judge-b", 1, 2))
    ledger.save_judgement(verdict(second, "judge-a", 1, 2))
    assert a.judgement_id is not None
    assert b.judgement_id is not None
    assert b.judgement_id > a.judgement_id
    found = ledger.judgements([first])
    assert [(j.judge_model, j.say_do) for j in found[first]] == [
        ("judge-a", 0.75),
        ("judge-b", 1.0),
    ]
    # Judged again by judge-a: its verdict replaced, and now the newest; judge-b's kept.
    again = ledger.save_judgement(verdict(first, "judge-a", 1, 3))
    found = ledger.judgements([first, second])
    assert [(j.judge_model, j.rationale) for j in found[first]] == [
        ("judge-b", "judge-b on day 2"),
        ("judge-a", "judge-a on day 3"),
    ]
    assert found[first][-1] == again
    assert [j.judge_model for j in found[second]] == ["judge-a"]


def _set_cash(ledger: Ledger, account_id: int, cash: Decimal) -> None:
    from sqlalchemy import update

    from openbell.store.tables import AccountRow

    with ledger._engine.begin() as connection:  # a test's shortcut: no fills needed for NAV
        connection.execute(update(AccountRow).where(AccountRow.id == account_id).values(cash=cash))
