"""The significance suite of a leaderboard read from a real ledger (SQLite and Postgres).

The ledger (`openbell_testkit.significance`) plants every account's NAV path; the board's suite
must be the pure suite (`ops.evaluation.significance`) of exactly those NAVs, with the baselines
picked by their kind, the skilled agent significant against the best baseline after Holm's
correction and no noise agent so, and the late joiner's entry-aligned returns counted from its own
first snapshot.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.evaluation.significance import board_significance
from openbell.ops.reports import exporting
from openbell.ops.reports.board_significance import (
    market_views,
    report_fields,
    significance_of,
    with_significance,
)
from openbell.store.ledger import Ledger
from openbell_testkit.significance import (
    BASELINES,
    DAYS,
    LATE_DAYS,
    NOISE_AGENTS,
    build_significance_ledger,
)

PERMUTATIONS = 2000


def test_the_boards_suite_is_the_suite_of_the_planted_navs(engine: Engine) -> None:
    planted = build_significance_ledger(Ledger(engine))
    (view,) = market_views(engine, ["crypto"], None, None)
    found = significance_of(view, permutations=PERMUTATIONS, seed=5)
    series = {
        agent: [NavPoint(at=at, nav=nav) for at, nav in points]
        for agent, points in planted.navs.items()
    }
    expected = board_significance(series, list(BASELINES), permutations=PERMUTATIONS, seed=5)
    # The same suite whatever the order the ledger lists the accounts in.
    assert {row.name: row for row in found.rows} == {row.name: row for row in expected.rows}
    assert len(found.rows) == len(expected.rows)
    assert replace(found, rows=()) == replace(expected, rows=())
    assert found.trials == NOISE_AGENTS + 4
    noise = [row for row in found.rows if row.name.startswith("noise")]
    assert len(noise) == NOISE_AGENTS
    assert not any(row.significant for row in noise)
    skilled = found.row("skilled")
    assert skilled is not None
    assert skilled.significant
    assert skilled.best_baseline == "buy-and-hold"
    assert {c.baseline for c in skilled.comparisons} == set(BASELINES)
    for name in BASELINES:
        row = found.row(name)
        assert row is not None
        assert row.comparisons == ()


def test_the_late_joiner_counts_from_its_first_snapshot(engine: Engine) -> None:
    planted = build_significance_ledger(Ledger(engine))
    (view,) = market_views(engine, ["crypto"], None, None)
    found = significance_of(view, permutations=PERMUTATIONS)
    late = found.row("late")
    assert late is not None
    assert late.periods == DAYS - LATE_DAYS - 1
    navs = dict(planted.navs["late"])
    first_at = min(navs)
    for days in (7, 30, 90):
        reference = navs[first_at + timedelta(days=days)] / navs[first_at] - 1
        assert late.entry_returns[days] == pytest.approx(float(reference), rel=1e-12)
    (comparison, _) = sorted(late.comparisons, key=lambda c: c.baseline)
    assert comparison.periods == DAYS - LATE_DAYS - 1  # paired on the periods both have


def test_the_records_carry_the_suite(engine: Engine) -> None:
    build_significance_ledger(Ledger(engine))
    (view,) = market_views(engine, ["crypto"], None, None)
    board = with_significance(view, permutations=PERMUTATIONS)
    record = exporting.leaderboard_record(board)
    rows = {row["name"]: row for row in record["significance"]["rows"]}
    assert record["significance"]["correction"] == "holm"
    assert rows["skilled"]["significant"] is True
    assert rows["skilled"]["adjusted_p_value_best"] <= 0.05
    assert exporting.leaderboard_record(view.leaderboard)["significance"] is None
    fields = report_fields(board.significance, "noise-00")
    assert fields["significant"] is False
    assert set(fields["adjusted_p_values"]) == set(BASELINES)
    assert report_fields(board.significance, "nobody") == {}
