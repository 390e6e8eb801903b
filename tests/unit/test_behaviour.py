"""Trading-behaviour metrics on hand-computed cases: turnover, HHI, cash, activity, calibration,
and the behavioural ones (hold share, switch rate, reactivity, persistence, revision rate,
protocol completion per agent kind, weight reactivity)."""

from __future__ import annotations

import math
import statistics
from decimal import Decimal

import pytest

from openbell.ops.evaluation import behaviour
from openbell.ops.evaluation.behaviour import (
    CycleActivity,
    Forecast,
    brier_score,
    cash_ratio,
    expected_calibration_error,
    hhi,
    no_trade_share,
    rejection_rate,
    trade_count,
    turnover,
)


def D(value: str) -> Decimal:
    return Decimal(value)


def test_turnover_is_traded_notional_over_average_nav() -> None:
    # Traded 1000 + 500 + 250.50 = 1750.50; average NAV (10000 + 10200 + 9800) / 3 = 10000.
    notionals = [D("1000"), D("500"), D("250.50")]
    assert turnover(notionals, [D("10000"), D("10200"), D("9800")]) == 0.17505


def test_turnover_edges() -> None:
    assert turnover([], [D("10000")]) == 0.0
    assert turnover([D("100")], []) is None
    assert turnover([D("100")], [D("0"), D("0")]) is None
    with pytest.raises(ValueError, match="negative"):
        turnover([D("-100")], [D("10000")])


def test_hhi_of_position_weights() -> None:
    # Weights 0.5, 0.3, 0.2: 0.25 + 0.09 + 0.04 = 0.38.
    assert hhi([D("5000"), D("3000"), D("2000")]) == 0.38
    # Four equal positions: 4 * 0.25 ** 2 = 0.25 (the 1/n floor); one position: 1.0.
    assert hhi([D("25.10")] * 4) == 0.25
    assert hhi([D("7")]) == 1.0
    assert hhi([]) is None
    assert hhi([D("0")]) is None


def test_cash_ratio() -> None:
    assert cash_ratio(D("2500"), D("10000")) == 0.25
    assert cash_ratio(D("0"), D("10000")) == 0.0
    assert cash_ratio(D("0"), D("0")) is None


CYCLES = [
    CycleActivity(orders=3, rejections=1, fills=2),
    CycleActivity(orders=0, rejections=0, fills=0),
    CycleActivity(orders=2, rejections=2, fills=0),
    CycleActivity(orders=1, rejections=0, fills=1),
]


def test_cycle_activity() -> None:
    assert trade_count(CYCLES) == 3
    # Cycles 2 and 3 of 4 made no fill.
    assert no_trade_share(CYCLES) == 0.5
    # 3 rejections of 6 orders.
    assert rejection_rate(CYCLES) == 0.5


def test_cycle_activity_edges() -> None:
    assert trade_count([]) == 0
    assert no_trade_share([]) is None
    assert rejection_rate([CycleActivity(orders=0, rejections=0, fills=0)]) is None
    with pytest.raises(ValueError, match="exceed"):
        CycleActivity(orders=1, rejections=2, fills=0)
    with pytest.raises(ValueError, match="negative"):
        CycleActivity(orders=1, rejections=0, fills=-1)


def f(confidence: float, outcome: bool) -> Forecast:
    return Forecast(confidence=confidence, outcome=outcome)


# Bin 9: four at 0.9, three true (gap |0.9 - 0.75| = 0.15); bin 5: two at 0.55, one true
# (gap 0.05); bin 2: four at 0.2, one true (gap 0.05). ECE = (4 * 0.15 + 2 * 0.05 + 4 * 0.05) / 10
# = 0.09. Brier = (3 * 0.01 + 0.81 + 0.2025 + 0.3025 + 3 * 0.04 + 0.64) / 10 = 0.2105.
FORECASTS = [
    *(f(0.9, True) for _ in range(3)),
    f(0.9, False),
    f(0.55, True),
    f(0.55, False),
    *(f(0.2, False) for _ in range(3)),
    f(0.2, True),
]


def test_ece_hand_value() -> None:
    assert expected_calibration_error(FORECASTS) == pytest.approx(0.09, rel=1e-12)


def test_brier_hand_value() -> None:
    assert brier_score(FORECASTS) == pytest.approx(0.2105, rel=1e-12)


def test_ece_bins_are_half_open() -> None:
    # 0.3 opens bin 3 and 0.25 sits in bin 2: gaps 0.3 and 0.75, ECE (0.3 + 0.75) / 2 = 0.525.
    # Were they binned together: |0.275 - 0.5| = 0.225.
    assert expected_calibration_error([f(0.3, False), f(0.25, True)]) == pytest.approx(0.525)
    # 1.0 belongs to the last bin, 0.0 to the first: both perfectly calibrated.
    assert expected_calibration_error([f(1.0, True), f(0.0, False)]) == 0.0


def test_ece_with_other_bin_counts() -> None:
    # One bin: |mean confidence 0.6 - share true 0.5| = 0.1.
    forecasts = [f(0.9, True), f(0.3, False)]
    assert expected_calibration_error(forecasts, bins=1) == pytest.approx(0.1)
    # Two bins: |0.9 - 1| and |0.3 - 0|, each weighted one half: 0.2.
    assert expected_calibration_error(forecasts, bins=2) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="bins"):
        expected_calibration_error(forecasts, bins=0)


def test_calibration_edges() -> None:
    assert expected_calibration_error([]) is None
    assert brier_score([]) is None
    assert brier_score([f(0.5, True), f(0.5, False)]) == 0.25
    assert brier_score([f(1.0, False)]) == 1.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        f(1.2, True)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        f(float("nan"), True)
    with pytest.raises(TypeError, match="bool"):
        Forecast(confidence=0.5, outcome=1)  # type: ignore[arg-type]


# -- Herculean's behavioural metrics ----------------------------------------------------------


def _change(before: str, after: str, **net: str) -> behaviour.PositionChange:
    return behaviour.PositionChange(
        held_before=frozenset(before.split()),
        held_after=frozenset(after.split()),
        net_quantities={symbol: Decimal(q) for symbol, q in net.items()},
    )


def test_hold_share_counts_cycles_whose_trades_net_out() -> None:
    changes = [
        _change("", "A", A="10"),
        _change("A", "A"),
        _change("A", "A", A="0", B="0"),  # a round trip in each symbol
        _change("A", "A", A="-5"),
    ]
    assert behaviour.hold_share(changes) == pytest.approx(2 / 4)
    assert behaviour.hold_share([]) is None


def test_switch_rate_counts_changes_of_the_held_set_not_resizes() -> None:
    changes = [
        _change("", "A", A="10"),  # enters
        _change("A", "A", A="5"),  # resizes
        _change("A", "B", A="-15", B="3"),  # rotates
        _change("B", "", B="-3"),  # exits
        _change("", ""),
    ]
    assert behaviour.switch_rate(changes) == pytest.approx(3 / 5)
    assert behaviour.switch_rate([]) is None


def test_weight_reactivity_is_the_pearson_correlation() -> None:
    weights, returns = [0.1, -0.05, 0.0, 0.2], [0.02, -0.01, 0.005, 0.03]
    expected = statistics.correlation(weights, returns)
    assert behaviour.weight_reactivity(weights, returns) == pytest.approx(expected, rel=1e-12)
    flipped = [-w for w in weights]
    assert behaviour.weight_reactivity(flipped, returns) == pytest.approx(-expected, rel=1e-12)


def test_weight_reactivity_is_undefined_without_spread_or_pairs() -> None:
    assert behaviour.weight_reactivity([0.0, 0.0, 0.0], [0.01, 0.02, 0.03]) is None
    assert behaviour.weight_reactivity([0.1, 0.2], [0.1, 0.2]) is None
    with pytest.raises(ValueError, match="finite"):
        behaviour.weight_reactivity([math.nan, 0.1, 0.2], [0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match="3 weight changes but 2 returns"):
        behaviour.weight_reactivity([0.0, 0.1, 0.2], [0.0, 0.1])


@pytest.mark.parametrize(
    ("net", "code"), [("10", 1), ("0.001", 1), ("0", 0), ("-3", -1), ("-0.5", -1)]
)
def test_the_action_code_is_the_direction_of_the_net_trade(net: str, code: int) -> None:
    assert behaviour.action_code(D(net)) == code


def test_reactivity_is_the_spearman_correlation_per_trajectory_averaged() -> None:
    # Trajectory A: codes (1, 0, -1, 1) against returns (0.05, 0.01, -0.02, 0.03).
    # Ranks of the codes: -1 -> 1, 0 -> 2, the two 1s share 3 and 4 -> 3.5: (3.5, 2, 1, 3.5).
    # Ranks of the returns: (4, 2, 1, 3). Centred (mean 2.5): codes (1, -0.5, -1.5, 1), returns
    # (1.5, -0.5, -1.5, 0.5). Covariance sum 1.5 + 0.25 + 2.25 + 0.5 = 4.5; the squares sum to
    # 1 + 0.25 + 2.25 + 1 = 4.5 and 2.25 + 0.25 + 2.25 + 0.25 = 5. rho = 4.5 / sqrt(22.5).
    a = [(1.0, 0.05), (0.0, 0.01), (-1.0, -0.02), (1.0, 0.03)]
    rho_a = 4.5 / math.sqrt(22.5)
    # Trajectory B: a seller into strength: codes (-1, 0, 1) against rising returns: rho = -1.
    b = [(-1.0, 0.03), (0.0, 0.02), (1.0, 0.01)]
    # Trajectory C: two pairs only, and D: codes that never vary; neither has a value.
    c = [(1.0, 0.01), (-1.0, 0.02)]
    d = [(0.0, 0.01), (0.0, 0.02), (0.0, -0.01)]
    assert rho_a == pytest.approx(0.9486832980505138)
    assert behaviour.reactivity([a, b, c, d]) == pytest.approx((rho_a - 1.0) / 2, rel=1e-12)
    assert behaviour.reactivity([c, d]) is None
    assert behaviour.reactivity([]) is None
    with pytest.raises(ValueError, match=r"in \[-1, 1\]"):
        behaviour.reactivity([[(2.0, 0.1), (0.0, 0.2), (1.0, 0.3)]])


def test_reactivity_matches_scipy_spearmanr() -> None:
    stats = pytest.importorskip("scipy.stats")
    codes = [1.0, 0.0, 0.0, -1.0, 1.0, 1.0, -1.0, 0.0, 0.5, -0.5]
    returns = [0.012, -0.004, 0.0, -0.02, 0.031, 0.007, -0.011, 0.002, 0.009, -0.003]
    expected = float(stats.spearmanr(codes, returns).statistic)
    found = behaviour.reactivity([list(zip(codes, returns, strict=True))])
    assert found == pytest.approx(expected, rel=1e-12)


def test_persistence_is_one_minus_the_normalized_turnover() -> None:
    # (1, 1, 0, -1): moves 0, 1, 1 over a range of 2: turnover (0 + 0.5 + 0.5) / 3 = 1/3.
    # (0, 0, 0): never moves: 1. (1, -1): one full flip: 0. A single step has no pair.
    trajectories = [[1.0, 1.0, 0.0, -1.0], [0.0, 0.0, 0.0], [1.0, -1.0], [1.0]]
    assert behaviour.persistence(trajectories) == pytest.approx((2 / 3 + 1.0 + 0.0) / 3)
    # A rating's exposures: strong buy 1 to buy 0.5 to sell -0.5: moves 0.5 and 1: 1 - 0.75 / 2.
    assert behaviour.persistence([[1.0, 0.5, -0.5]]) == pytest.approx(0.625)
    assert behaviour.persistence([[1.0]]) is None
    assert behaviour.persistence([]) is None


def test_revision_rate_pairs_consecutive_committed_reports() -> None:
    # buy, buy, hold, (no report), hold, sell: pairs (buy, buy), (buy, hold), (hold, sell): the
    # missing report breaks the chain, so (hold, hold) is no pair. 2 of 3 differ.
    first = ["buy", "buy", "hold", None, "hold", "sell"]
    # Never revised: 0 of 2.
    second = ["sell", "sell", "sell"]
    # No two committed reports in a row: no pair.
    third = ["buy", None, "sell"]
    assert behaviour.revision_rate([first, second, third]) == pytest.approx((2 / 3 + 0.0) / 2)
    assert behaviour.revision_rate([third]) is None


def _step(**facts: object) -> behaviour.ProtocolStep:
    return behaviour.ProtocolStep(**facts)  # type: ignore[arg-type]


def test_protocol_completion_of_an_llm_agent() -> None:
    steps = [
        _step(done=True, agent_finished=True, stop_reason="finished"),
        _step(done=True, agent_finished=False, stop_reason="max_tool_calls"),
        _step(done=True, agent_finished=True, stop_reason="max_wall_s"),
        _step(done=False, agent_finished=True, stop_reason="finished"),
        # a structured mode: the model answered, the mode placed the orders and finished
        _step(done=True, agent_finished=True, stop_reason="answered"),
        # an open-research model that answered in text: the loop finished in its place
        _step(done=True, agent_finished=False, stop_reason="answered"),
        # a structured mode whose every answer failed validation: the mode finished, no trade
        _step(done=True, agent_finished=True, stop_reason="invalid_answer"),
    ]
    assert behaviour.protocol_completion(steps, behaviour.llm_submitted) == pytest.approx(2 / 7)
    assert behaviour.protocol_completion([], behaviour.llm_submitted) is None


def test_protocol_completion_of_the_other_kinds() -> None:
    outside = [_step(done=True, agent_finished=True), _step(done=True), _step(done=False)]
    assert behaviour.protocol_completion(outside, behaviour.outside_submitted) == 1 / 3
    # A rating agent: a done cycle with its report stored; no finish row is needed.
    rating = [_step(done=True, reported=True)] * 3 + [_step(done=True), _step(done=False)]
    assert behaviour.protocol_completion(rating, behaviour.rating_submitted) == 3 / 5
    strategy = [
        _step(done=True, strategy_outcome="ok"),
        _step(done=True, strategy_outcome="error"),
        _step(done=True),
        _step(done=False, strategy_outcome="ok"),
    ]
    assert behaviour.protocol_completion(strategy, behaviour.strategy_submitted) == 1 / 4
    plugin = [_step(done=True), _step(done=False)]
    assert behaviour.protocol_completion(plugin, behaviour.plugin_submitted) == 1 / 2
