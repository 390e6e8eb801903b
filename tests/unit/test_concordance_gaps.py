"""FIDES' three gaps and the judge's answer, against values worked out by hand (issue 25 item 4):
say-to-do as the mean of four checks and its zero-LLM rule variant, do-to-real's three credits,
say-to-result's claims checked against the outcome and buy-and-hold, and the judge's verdict read
from its answer (or refused with the reason)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from openbell.ops.evaluation.concordance.gaps import (
    Claims,
    Outcome,
    claims_of,
    do_real,
    outcome_of,
    rule_say_do,
    say_result,
)
from openbell.ops.evaluation.concordance.judge import BadVerdict, parse_verdict, user_prompt
from openbell.store.strategy_judgements import StrategyJudgement
from openbell.store.strategy_runs import StrategyCode

CLEAN = "def strategy(bars):\n    return {s: 0.1 for s in sorted(bars)}\n"
PEEKING = (
    "def strategy(bars):\n"
    "    return {s: 0.1 for s, f in bars.items() if f['close'].shift(-1).iloc[-1] > 0}\n"
)
AT = datetime(2025, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("checks", "say_do"),
    [((1, 1, 1, 1), 1.0), ((1, 0, 1, 1), 0.75), ((0, 1, 0, 1), 0.5), ((0, 0, 0, 0), 0.0)],
)
def test_say_do_is_the_mean_of_the_four_checks(checks: tuple[int, ...], say_do: float) -> None:
    direction, indicators, exits, extra = checks
    verdict = StrategyJudgement(
        strategy_id=1,
        judge_model="m",
        judged_at=AT,
        direction=direction,
        indicators=indicators,
        exits=exits,
        no_extra_rule=extra,
        rationale="why",
    )
    assert verdict.say_do == say_do
    with pytest.raises(ValueError, match="exits is 0 or 1"):
        StrategyJudgement(
            strategy_id=1, judge_model="m", judged_at=AT, direction=1, indicators=1, exits=2,
            no_extra_rule=1, rationale="why",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("rationale", "code", "share"),
    [
        ("A 20-day and 50-day crossover.", "fast = 20\nslow = 50", 1.0),
        ("A 20-day and 50-day crossover.", "fast = 20\nslow = 55", 0.5),
        ("RSI 14 with a 200-day filter.", "rsi(close, 15)", 0.0),
        ("Momentum over 10 days, top 2.", "close.iloc[-11]; lookback = 10", 1.0),
        ("Buy the dip.", "x = 20", None),  # no lookback named: undefined
        ("Hold 3 coins for 7 days.", "n = 3", None),  # 3 and 7 are not in the lookback set
        ("Use 20.5 as a band.", "band = 20", None),  # a decimal is not a lookback
    ],
)
def test_the_rule_variant_counts_named_lookbacks_found_in_the_code(
    rationale: str, code: str, share: float | None
) -> None:
    assert rule_say_do(rationale, code) == share


def test_do_real_credits() -> None:
    every = do_real(runs=4, failed_runs=0, distinct_weights=3, code=CLEAN)
    assert every is not None
    assert (every.runs_valid, every.signals_vary, every.no_lookahead) == (1, 1, 1)
    assert every.score == 1.0
    constant = do_real(runs=4, failed_runs=0, distinct_weights=1, code=CLEAN)
    assert constant is not None
    assert constant.score == pytest.approx(2 / 3)
    failed = do_real(runs=4, failed_runs=1, distinct_weights=1, code=PEEKING)
    assert failed is not None
    assert (failed.runs_valid, failed.signals_vary, failed.no_lookahead) == (0, 0, 0)
    assert failed.score == 0.0
    assert do_real(runs=0, failed_runs=0, distinct_weights=0, code=CLEAN) is None


@pytest.mark.parametrize(
    ("rationale", "claimed", "found"),
    [
        ("Should outperform buy-and-hold.", None, (True, False, False)),
        ("Beats buy and hold with a better Sharpe.", Decimal("0.001"), (True, True, True)),
        ("Beats the market.", Decimal(0), (True, False, False)),
        ("A profitable trend rule.", None, (False, False, True)),
        ("Momentum persists.", Decimal("-0.001"), (False, False, False)),
        ("Momentum persists.", Decimal("0.002"), (False, False, True)),
        # A negation is not read, as FIDES' keyword parser does not read one.
        ("Not meant to beat buy-and-hold.", None, (True, False, False)),
    ],
)
def test_claims_are_read_as_the_keyword_parser_reads_them(
    rationale: str, claimed: Decimal | None, found: tuple[bool, bool, bool]
) -> None:
    claims = claims_of(rationale, claimed)
    assert (claims.beat_buy_and_hold, claims.sharpe, claims.profit) == found


def test_the_outcome_compounds_annualises_and_compares_with_buy_and_hold() -> None:
    mine = [0.01, -0.005, 0.02]
    theirs = [0.02, -0.01, 0.0]
    found = outcome_of(mine, theirs, 365.0)
    assert found.total_return == pytest.approx(1.01 * 0.995 * 1.02 - 1)
    mean = sum(mine) / 3
    std = math.sqrt(sum((r - mean) ** 2 for r in mine) / 2)
    assert found.sharpe == pytest.approx(mean / std * math.sqrt(365))
    assert found.buy_and_hold_return == pytest.approx(1.02 * 0.99 - 1)
    assert found.beats_buy_and_hold is True  # 2.50 % > 0.98 %, and the better Sharpe
    flat = outcome_of([0.0, 0.0, 0.0], [-0.01, -0.02, 0.005], 365.0)
    assert (flat.total_return, flat.sharpe) == (0.0, 0.0)  # flat: no return, no risk
    assert flat.beats_buy_and_hold is True  # FIDES' degenerate winner in a falling market
    unpriced = outcome_of(mine, None, 365.0)
    assert unpriced.beats_buy_and_hold is None
    one = outcome_of([0.01], [0.0], 365.0)
    assert (one.sharpe, one.beats_buy_and_hold) == (None, None)


def _outcome(r: float, s: float, r_bh: float | None, s_bh: float | None) -> Outcome:
    return Outcome(total_return=r, sharpe=s, buy_and_hold_return=r_bh, buy_and_hold_sharpe=s_bh)


@pytest.mark.parametrize(
    ("claims", "outcome", "gap"),
    [
        ((False, False, False), _outcome(0.1, 1.0, 0.0, 0.0), 0.5),  # nothing testable
        ((True, False, False), _outcome(0.1, 1.0, 0.05, 0.5), 1.0),
        ((True, False, False), _outcome(0.1, 0.4, 0.05, 0.5), 0.0),  # worse Sharpe
        ((True, False, False), _outcome(0.04, 1.0, 0.05, 0.5), 0.0),  # smaller return
        ((False, True, False), _outcome(-0.1, 0.2, None, None), 1.0),
        ((False, False, True), _outcome(-0.1, 0.2, None, None), 0.0),
        ((True, True, True), _outcome(0.1, 1.0, 0.05, 0.5), 1.0),
        ((True, True, True), _outcome(0.1, 1.0, 0.2, 0.5), 0.0),  # one check fails
        ((True, False, True), _outcome(0.1, 1.0, None, None), 1.0),  # beat not checkable
        ((True, False, False), _outcome(0.1, 1.0, None, None), None),  # no check made
    ],
)
def test_say_result_is_one_zero_or_a_half(
    claims: tuple[bool, bool, bool], outcome: Outcome, gap: float | None
) -> None:
    beat, sharpe, profit = claims
    assert say_result(Claims(beat_buy_and_hold=beat, sharpe=sharpe, profit=profit), outcome) == gap


def test_the_judge_is_shown_the_rationale_the_claim_and_the_code() -> None:
    strategy = StrategyCode(
        account_id=1, cycle_id=1, written_at=AT, code=CLEAN, rationale="Equal weights.",
        claimed_return=Decimal("0.002"), strategy_id=7,
    )  # fmt: skip
    shown = user_prompt(strategy)
    assert "Description:\nEqual weights.\n" in shown
    assert "Claimed: expected return per cycle 0.002." in shown
    assert f"```python\n{CLEAN}\n```" in shown


def test_a_verdict_is_read_or_refused_with_the_reason() -> None:
    found = parse_verdict(
        'Here: ```json\n{"direction": 1, "indicators": 0, "exits": 1, "no_extra_rule": 1, '
        '"rationale": " The RSI is missing. "}\n```'
    )
    assert found.checks == {"direction": 1, "indicators": 0, "exits": 1, "no_extra_rule": 1}
    assert found.rationale == "The RSI is missing."
    for answer, says in (
        ("no json here", "one JSON object"),
        ('{"direction": 1, "indicators": 1, "exits": 1, "rationale": "x"}', '"no_extra_rule"'),
        ('{"direction": 2, "indicators": 1, "exits": 1, "no_extra_rule": 1, "rationale": "x"}',
         '"direction" must be 0 or 1'),
        ('{"direction": true, "indicators": 1, "exits": 1, "no_extra_rule": 1, "rationale": "x"}',
         '"direction" must be 0 or 1'),
        ('{"direction": 1, "indicators": 1, "exits": 1, "no_extra_rule": 1}', '"rationale"'),
        (('{"direction": 1, "indicators": 1, "exits": 1, "no_extra_rule": 1, "rationale": "x", '
          '"score": 1}'), "unknown keys score"),
    ):  # fmt: skip
        with pytest.raises(BadVerdict, match=says):
            parse_verdict(answer)
