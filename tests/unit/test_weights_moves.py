"""The orders that move an account to target weights (`weights_trading.moves`): long-only as
before, and signed, with shorts, covers and changes of side, in the order that frees cash and
margin first (a parameter table)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from openbell.agents.weights_trading import moves

D = Decimal


@pytest.mark.parametrize(
    ("held", "weights", "expected"),
    [
        # Long-only, as the rating and strategy agents always traded: sells first, then buys.
        (
            {"A": "0.3", "B": "0.1"},
            {"A": "0.1", "C": "0.2"},
            [("A", "sell", "0.1"), ("B", "sell", "0"), ("C", "buy", "0.2")],
        ),
        # A change within the band is left alone, unless it closes a holding.
        ({"A": "0.30", "B": "0.005"}, {"A": "0.305", "B": "0"}, [("B", "sell", "0")]),
        # Shorts: open, deepen, reduce, close.
        (
            {"B": "-0.1", "C": "-0.3", "D": "-0.2"},
            {"A": "-0.2", "B": "-0.25", "C": "-0.1", "D": "0"},
            [
                ("C", "cover", "0.1"),
                ("D", "cover", "0"),
                ("A", "short", "0.2"),
                ("B", "short", "0.25"),
            ],
        ),
        # A change of side closes first: long A goes short, short B goes long.
        (
            {"A": "0.2", "B": "-0.2"},
            {"A": "-0.1", "B": "0.15"},
            [("A", "sell", "0"), ("B", "cover", "0"), ("A", "short", "0.1"), ("B", "buy", "0.15")],
        ),
    ],
)
def test_the_moves_to_target_weights(
    held: dict[str, str], weights: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    found = moves(
        {s: D(w) for s, w in held.items()},
        {s: D(w) for s, w in weights.items()},
        band=D("0.01"),
    )
    assert found == [(symbol, side, D(target)) for symbol, side, target in expected]
