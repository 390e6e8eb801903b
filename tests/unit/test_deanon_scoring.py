"""The probe's scoring, pure: Wilson intervals, trading-day distances, boards, sectors, answers."""

from __future__ import annotations

import math
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.markets.calendars import calendar_for
from openbell.markets.rules import Board
from openbell.ops.evaluation.probes.deanon_scoring import (
    board_named,
    read_answer,
    recovery,
    same_sector,
    session_distance,
    wilson,
)


@pytest.mark.parametrize(
    ("hits", "n", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion",
        # Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no correction).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_intervals_match_the_textbook(hits: int, n: int, low: float, high: float) -> None:
    found = wilson(hits, n)
    assert found == pytest.approx((low, high), abs=5e-5)


def _reference(hits: int, n: int, z: float) -> tuple[float, float]:
    """The Wilson interval as the roots of `(p - phat)^2 = z^2 p (1 - p) / n` in `p`: the
    quadratic `(1 + z^2/n) p^2 - (2 phat + z^2/n) p + phat^2 = 0`, solved directly."""
    phat = hits / n
    a = 1 + z * z / n
    b = -(2 * phat + z * z / n)
    c = phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_intervals_are_the_score_tests_roots(case: tuple[int, int]) -> None:
    hits, n = case
    low, high = wilson(hits, n)
    ref_low, ref_high = _reference(hits, n, 1.959963984540054)
    assert low == pytest.approx(max(0.0, ref_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, ref_high), abs=1e-12)
    assert low <= hits / n <= high


def test_wilson_without_trials_is_the_whole_range_and_rejects_impossible_counts() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="hits must be in"):
        wilson(5, 4)


def test_a_recovery_is_rated_over_its_outcomes_with_its_interval() -> None:
    found = recovery([(True, 0.1), (False, 0.1), (False, 0.1), (True, 0.3)], shown=False)
    assert (found.hits, found.trials, found.rate) == (2, 4, 0.5)
    assert (found.low, found.high) == wilson(2, 4)
    assert found.chance == pytest.approx(0.15)
    none = recovery([], shown=True)
    assert (none.trials, none.rate, none.low, none.high) == (0, 0.0, 0.0, 1.0)


XSHG = calendar_for("XSHG").sessions_between(date(2025, 1, 2), date(2025, 12, 31))


@pytest.mark.parametrize(
    ("truth", "answer", "distance"),
    [
        (date(2025, 9, 30), date(2025, 9, 30), 0),
        # The National Day holiday: 1-8 October 2025 are not sessions; nine calendar days on,
        # 9 October is the next session.
        (date(2025, 9, 30), date(2025, 10, 9), 1),
        (date(2025, 10, 9), date(2025, 9, 30), 1),
        (date(2025, 10, 9), date(2025, 9, 19), 8),
        (date(2025, 9, 26), date(2025, 9, 27), 0),  # a Saturday after a Friday
        (date(2025, 9, 26), date(2025, 9, 29), 1),  # the Monday after
        (date(2025, 9, 26), date(2025, 10, 17), 9),
    ],
)
def test_dates_are_apart_by_trading_days(truth: date, answer: date, distance: int) -> None:
    assert abs(session_distance(XSHG, truth, answer)) == distance


@pytest.mark.parametrize(
    ("said", "board"),
    [
        ("Main Board", Board.MAIN),
        ("SSE main board", Board.MAIN),
        ("主板", Board.MAIN),
        ("ChiNext", Board.CHINEXT),
        ("创业板", Board.CHINEXT),
        ("STAR Market", Board.STAR),
        ("科创板", Board.STAR),
        ("Beijing Stock Exchange", Board.BEIJING),
        ("BSE", Board.BEIJING),
        ("Nasdaq", None),
    ],
)
def test_boards_are_read_in_english_or_chinese(said: str, board: Board | None) -> None:
    assert board_named(said) is board


def test_sectors_match_ignoring_case_and_spacing() -> None:
    assert same_sector(" consumer  staples", "Consumer Staples")
    assert same_sector("Oil & Gas", "oil and gas")
    assert not same_sector("Banks", "Insurance")


def test_an_answer_keeps_five_tickers_and_reads_sector_and_board() -> None:
    reply = (
        'Thinking... {"tickers": ["A", "B", "C", "D", "E", "F"], "date": "2025-10-09", '
        '"sector": "Banks", "board": "main"}'
    )
    found = read_answer(reply)
    assert found.tickers == ("A", "B", "C", "D", "E")
    assert (found.day, found.sector, found.board) == (date(2025, 10, 9), "Banks", "main")
    assert read_answer('{"ticker": "X"}').tickers == ("X",)
    assert read_answer('{"tickers": "not a list", "board": "STAR"}').tickers == ()
    assert read_answer("nothing").empty
