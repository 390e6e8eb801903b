"""Two ledgers' leaderboards side by side: `openbell leaderboard --beside LEDGER`.

This module owns pairing the rows of one market's board in two ledgers by agent, the shape of a
counterfactual (`openbell replay --answers A --swap-model NAME=MODEL` writes ledger B: the same
recorded cycles, one agent re-decided by another model). Each `BesideRow` holds an agent's rank,
composite, cumulative return and final NAV in both (None where the agent has no account), and
`changed` says whether its final NAV or return differs; the benchmark is paired as a row too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openbell.ops.reports.market_reports import Leaderboard, LeaderboardRow


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One agent's figures in one ledger."""

    rank: int | None
    composite: float | None
    cumulative_return: float | None
    final_nav: Decimal | None

    @classmethod
    def of(cls, row: LeaderboardRow) -> Side:
        """The figures of a board row."""
        return cls(
            rank=row.rank,
            composite=row.ranking.composite,
            cumulative_return=row.ranking.cumulative_return,
            final_nav=row.final_nav,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BesideRow:
    """One agent (or the benchmark) in both ledgers: `left` (this one) and `right` (--beside)."""

    name: str
    is_benchmark: bool
    left: Side | None
    right: Side | None

    @property
    def changed(self) -> bool:
        """Whether the agent's result differs between the ledgers (or it is in one only)."""
        if self.left is None or self.right is None:
            return True
        return (self.left.final_nav, self.left.cumulative_return) != (
            self.right.final_nav,
            self.right.cumulative_return,
        )


def beside(left: Leaderboard, right: Leaderboard | None) -> tuple[BesideRow, ...]:
    """The rows of `left` in its order, each with its agent's row in `right`; then the agents of
    `right` that `left` lacks."""
    others = {} if right is None else {row.name: row for row in right.rows}
    paired = []
    for row in left.rows:
        other = others.pop(row.name, None)
        paired.append(
            BesideRow(
                name=row.name,
                is_benchmark=row.is_benchmark,
                left=Side.of(row),
                right=None if other is None else Side.of(other),
            )
        )
    paired.extend(
        BesideRow(name=row.name, is_benchmark=row.is_benchmark, left=None, right=Side.of(row))
        for row in others.values()
    )
    return tuple(paired)


def beside_boards(
    left: Sequence[Leaderboard], right: Sequence[Leaderboard]
) -> list[tuple[str, tuple[BesideRow, ...]]]:
    """Each market of `left` (then those only in `right`) with its rows paired."""
    by_market = {board.market: board for board in right}
    found = [(board.market, beside(board, by_market.pop(board.market, None))) for board in left]
    found.extend(
        (market, tuple(replace_sides(row) for row in beside(board, None)))
        for market, board in by_market.items()
    )
    return found


def replace_sides(row: BesideRow) -> BesideRow:
    """`row` with its sides swapped (a market only the --beside ledger holds)."""
    return BesideRow(name=row.name, is_benchmark=row.is_benchmark, left=row.right, right=row.left)


def beside_record(market: str, rows: Sequence[BesideRow]) -> dict[str, Any]:
    """One market's paired rows as JSON-ready values."""

    def side(found: Side | None) -> dict[str, Any] | None:
        if found is None:
            return None
        return {
            "rank": found.rank,
            "composite": found.composite,
            "cumulative_return": found.cumulative_return,
            "final_nav": None if found.final_nav is None else str(found.final_nav),
        }

    return {
        "market": market,
        "rows": [
            {
                "agent": None if row.is_benchmark else row.name,
                "name": row.name,
                "ledger": side(row.left),
                "beside": side(row.right),
                "changed": row.changed,
            }
            for row in rows
        ],
    }
