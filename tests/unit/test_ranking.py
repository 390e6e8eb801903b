"""The StockBench composite rank on small tables with z-scores worked out by hand."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from openbell.ops.evaluation.ranking import Entrant, RankRow, composite_rank
from openbell.ops.evaluation.return_metrics import Panel

START = datetime(2025, 1, 6, tzinfo=UTC)


def make_panel(**overrides: Any) -> Panel:
    fields: dict[str, Any] = {
        "periods": 20,
        "periods_per_year": 252.0,
        "start_at": START,
        "end_at": START,
        "cumulative_return": 0.0,
        "annual_return": 0.0,
        "annual_volatility": 0.1,
        "sharpe_ratio": 0.0,
        "sortino_ratio": 0.0,
        "max_drawdown": -0.1,
        "calmar_ratio": 0.0,
        "excess_return": None,
        "information_ratio": None,
    }
    fields.update(overrides)
    return Panel(**fields)


def entrant(name: str, cum: float | None, dd: float | None, sortino: float | None) -> Entrant:
    panel = make_panel(cumulative_return=cum, max_drawdown=dd, sortino_ratio=sortino)
    return Entrant(name=name, panel=panel)


# Cumulative return: mean 0.10, sample std 0.10 -> z  0, -1,  1.
# Max drawdown:      mean -0.10, sample std 0.05 -> z  1,  0, -1.
# Sortino:           mean 1.0, sample std 1.0    -> z  1,  0, -1.
# Composite: a 2/3, b -1/3, c -1/3 (a tie). Population std would give z = +-1.2247 instead.
TABLE = [
    entrant("c", 0.20, -0.15, 0.0),
    entrant("a", 0.10, -0.05, 2.0),
    entrant("b", 0.00, -0.10, 1.0),
]


def by_name(rows: tuple[RankRow, ...]) -> dict[str, RankRow]:
    return {row.name: row for row in rows}


def test_known_z_scores_and_composites() -> None:
    rows = by_name(composite_rank(TABLE))
    expected = {
        "a": (0.0, 1.0, 1.0, 2 / 3),
        "b": (-1.0, 0.0, 0.0, -1 / 3),
        "c": (1.0, -1.0, -1.0, -1 / 3),
    }
    for name, (z_cum, z_dd, z_sortino, composite) in expected.items():
        row = rows[name]
        assert row.z_cumulative_return == pytest.approx(z_cum, abs=1e-12), name
        assert row.z_max_drawdown == pytest.approx(z_dd, abs=1e-12), name
        assert row.z_sortino_ratio == pytest.approx(z_sortino, abs=1e-12), name
        assert row.composite == pytest.approx(composite, abs=1e-12), name


def test_sorted_by_composite_with_shared_ranks_for_ties() -> None:
    rows = composite_rank(TABLE)
    assert [(row.name, row.rank) for row in rows] == [("a", 1), ("b", 2), ("c", 2)]
    assert [row.cumulative_return for row in rows] == [0.10, 0.00, 0.20]


def test_benchmark_is_placed_but_neither_ranked_nor_scaling() -> None:
    benchmark = Entrant(
        name="QQQ",
        panel=make_panel(cumulative_return=0.05, max_drawdown=-0.10, sortino_ratio=1.0),
        is_benchmark=True,
    )
    with_benchmark = composite_rank([*TABLE, benchmark])
    # z: (0.05 - 0.10) / 0.10 = -0.5, 0, 0 -> composite -1/6, between a and b.
    assert [(row.name, row.rank, row.is_benchmark) for row in with_benchmark] == [
        ("a", 1, False),
        ("QQQ", None, True),
        ("b", 2, False),
        ("c", 2, False),
    ]
    assert by_name(with_benchmark)["QQQ"].composite == pytest.approx(-1 / 6)
    # The accounts' rows are the same as without the benchmark.
    assert [r for r in with_benchmark if not r.is_benchmark] == list(composite_rank(TABLE))


def test_single_account_and_zero_spread_score_zero() -> None:
    (only,) = composite_rank([entrant("solo", 0.3, -0.2, 1.5)])
    assert (only.z_cumulative_return, only.z_max_drawdown, only.z_sortino_ratio) == (0, 0, 0)
    assert (only.composite, only.rank) == (0.0, 1)
    twins = composite_rank([entrant("y", 0.1, -0.1, 1.0), entrant("x", 0.1, -0.1, 1.0)])
    assert [(row.name, row.composite, row.rank) for row in twins] == [("x", 0.0, 1), ("y", 0.0, 1)]


def test_undefined_sortino_is_neutral_and_left_out_of_the_scale() -> None:
    rows = by_name(
        composite_rank(
            [
                entrant("x", 0.1, -0.1, 2.0),
                entrant("y", 0.1, -0.1, None),
                entrant("z", 0.1, -0.1, 0.0),
            ]
        )
    )
    # Sortino over x and z only: mean 1, sample std sqrt(2).
    assert rows["x"].z_sortino_ratio == pytest.approx(1 / math.sqrt(2))
    assert rows["z"].z_sortino_ratio == pytest.approx(-1 / math.sqrt(2))
    assert rows["y"].z_sortino_ratio == 0.0
    assert rows["x"].composite == pytest.approx(1 / (3 * math.sqrt(2)))
    assert [rows[n].rank for n in "xyz"] == [1, 2, 3]


def test_account_without_returns_is_unranked_and_last() -> None:
    empty = Entrant(
        name="new",
        panel=make_panel(periods=0, cumulative_return=None, max_drawdown=None, sortino_ratio=None),
    )
    rows = composite_rank([empty, *TABLE])
    assert rows[-1].name == "new"
    assert (rows[-1].composite, rows[-1].rank, rows[-1].z_cumulative_return) == (None, None, None)
    # It does not move the others.
    assert rows[:-1] == composite_rank(TABLE)


def test_no_entrants_and_duplicate_names() -> None:
    assert composite_rank([]) == ()
    with pytest.raises(ValueError, match="unique"):
        composite_rank([TABLE[0], TABLE[0]])


def test_rows_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        composite_rank(TABLE)[0].rank = 5  # type: ignore[misc]
