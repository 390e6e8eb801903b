"""The arena page's significance columns: each row's deflated Sharpe, its Holm-adjusted p-value
against its best baseline and its immature mark, and the board's settings for the explanation.

This module owns how a market's significance suite (`ops.reports.board_significance`, the suite of
`openbell leaderboard --wide` and `GET /api/v1/leaderboard/{market}/significance`, with their
default permutations and seed) appears on the arena page, written as the CLI's table writes it
(`ops.reports.figures`: DSR to 3 places, p to 4). A row the suite did not compare (the benchmark, an
account without snapshots) shows the missing mark; a baseline has a DSR but no p-value (it is
what the others are tested against).
"""

from __future__ import annotations

from dataclasses import dataclass

from openbell.ops.evaluation.significance import BoardSignificance
from openbell.ops.reports import figures


@dataclass(frozen=True, slots=True, kw_only=True)
class SignificanceCells:
    """One row's significance figures as the page shows them."""

    dsr: str
    adjusted_p: str
    best_baseline: str | None
    immature: bool
    significant: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SignificanceNote:
    """The board's suite settings, for the explanation under its table."""

    alpha: str
    trials: int
    permutations: int
    seed: int
    correction: str


#: The cells of a row the suite did not compare.
NOT_COMPARED = SignificanceCells(
    dsr=figures.MISSING, adjusted_p=figures.MISSING, best_baseline=None, immature=False,
    significant=False,
)  # fmt: skip


def significance_cells(found: BoardSignificance | None, name: str) -> SignificanceCells:
    """The figures of the account called `name` on the board `found` (not compared: dashes)."""
    row = None if found is None else found.row(name)
    if row is None:
        return NOT_COMPARED
    best = row.best
    return SignificanceCells(
        dsr=figures.places(row.dsr, 3),
        adjusted_p=figures.places(None if best is None else best.adjusted_p_value, 4),
        best_baseline=row.best_baseline,
        immature=row.immature,
        significant=row.significant,
    )


def significance_note(found: BoardSignificance) -> SignificanceNote:
    """The settings the page states under the board."""
    return SignificanceNote(
        alpha=f"{found.alpha:g}",
        trials=found.trials,
        permutations=found.permutations,
        seed=found.seed,
        correction=found.correction.capitalize(),
    )
