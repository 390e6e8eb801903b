"""The concordance of a strategy-code agent (FIDES) as a record: each strategy's three gaps, its
claim against its outcome and buy-and-hold, and the agent's summary.

This module owns `strategy_scores` (every strategy of an account, scored: `gaps.py` over the
ledger's `strategy_concordance`, the judges' verdicts and `buy_and_hold.py`) and the records
`openbell report AGENT` and the API's `concordance` document show: one entry per strategy (oldest
first) and `summary`, the agent's row of FIDES' leaderboard (the mean of each gap over the
strategies that have it, and the counts: strategies that beat buy-and-hold, that claimed to, and
that claimed to and did). The say-to-do columns are the newest verdict's (the judge that ran last,
`openbell judge`), with every judge's score in `say_do_by_judge`: judging again with another model
changes these columns and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Engine

from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import report_sources
from openbell.ops.evaluation.concordance.buy_and_hold import buy_and_hold_returns
from openbell.ops.evaluation.concordance.gaps import (
    Claims,
    DoReal,
    Outcome,
    claims_of,
    do_real,
    outcome_of,
    rule_say_do,
    say_result,
)
from openbell.store.ledger import Ledger
from openbell.store.strategy_judgements import StrategyJudgement
from openbell.store.strategy_runs import Concordance

STRATEGY_CODE_KIND: Final = "strategy_code"
_PLACES: Final = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyScore:
    """One strategy's concordance: its runs against its claim (`concordance`), the judges'
    verdicts (oldest first), and FIDES' three gaps with what they are read from."""

    concordance: Concordance
    judgements: tuple[StrategyJudgement, ...]
    rule_say_do: float | None
    do_real: DoReal | None
    claims: Claims
    outcome: Outcome
    buy_and_hold: tuple[float, ...] | None
    say_result: float | None

    @property
    def judgement(self) -> StrategyJudgement | None:
        """The newest verdict, or None when the strategy was never judged."""
        return self.judgements[-1] if self.judgements else None

    @property
    def say_do(self) -> float | None:
        """The newest verdict's say-to-do gap."""
        return None if self.judgement is None else self.judgement.say_do

    @property
    def realised_edge(self) -> float | None:
        """The strategy's mean return per cycle minus buy-and-hold's over the same periods."""
        mine, theirs = self.concordance.returns, self.buy_and_hold
        if not mine or not theirs:
            return None
        return math.fsum(mine) / len(mine) - math.fsum(theirs) / len(theirs)

    @property
    def position_density(self) -> float | None:
        """The share of its valid runs that held anything (FIDES' non-flat share)."""
        valid = self.concordance.runs - self.concordance.failed_runs
        return self.concordance.invested_runs / valid if valid else None


def strategy_scores(
    engine: Engine,
    account_id: int,
    market: str,
    periods_per_year: float,
    *,
    sources: Sequence[ReplaySource] | None = None,
) -> list[StrategyScore]:
    """Every strategy of the account, oldest first, scored (see the module docstring); Sharpe
    ratios annualised with `periods_per_year`; buy-and-hold priced from `sources` (default: the
    report's)."""
    ledger = Ledger(engine)
    found = ledger.strategy_concordance(account_id)
    verdicts = ledger.judgements([c.strategy.strategy_id for c in found if c.strategy.strategy_id])
    if sources is None:  # one read of the prices for every strategy's periods
        stamps = sorted({instant for c in found for span in c.spans for instant in span})
        symbols = sorted({symbol for c in found for symbol in c.offered})
        sources = report_sources(engine, market, stamps, symbols=symbols) if symbols else ()
    scores = []
    for concordance in found:
        strategy = concordance.strategy
        held = buy_and_hold_returns(
            engine, market, concordance.offered, concordance.spans, sources=sources
        )
        claims = claims_of(strategy.rationale, strategy.claimed_return)
        outcome = outcome_of(concordance.returns, held, periods_per_year)
        scores.append(
            StrategyScore(
                concordance=concordance,
                judgements=tuple(verdicts.get(strategy.strategy_id or 0, ())),
                rule_say_do=rule_say_do(strategy.rationale, strategy.code),
                do_real=do_real(
                    runs=concordance.runs,
                    failed_runs=concordance.failed_runs,
                    distinct_weights=concordance.distinct_weights,
                    code=strategy.code,
                ),
                claims=claims,
                outcome=outcome,
                buy_and_hold=None if held is None else tuple(held),
                say_result=say_result(claims, outcome) if concordance.periods else None,
            )
        )
    return scores


def concordance_record(
    engine: Engine, account_id: int, market: str, periods_per_year: float
) -> dict[str, Any]:
    """`strategy_N` -> the N-th strategy's entry, and `concordance`, the summary: what `openbell
    report` adds for a strategy-code agent."""
    scores = strategy_scores(engine, account_id, market, periods_per_year)
    record: dict[str, Any] = {
        f"strategy_{index}": strategy_entry(score) for index, score in enumerate(scores, start=1)
    }
    record["concordance"] = summary_entry(scores)
    return record


def strategy_entry(score: StrategyScore) -> dict[str, Any]:
    """One strategy's entry: its claim and outcome, its three gaps and their parts."""
    gap = score.concordance
    claimed = gap.strategy
    verdict = score.judgement
    outcome = score.outcome
    credits = score.do_real
    return {
        "written_at": claimed.written_at.isoformat(),
        "answers": claimed.answers,
        "runs": gap.runs,
        "failed_runs": gap.failed_runs,
        "periods": gap.periods,
        "claimed_return": _text(claimed.claimed_return),
        "realised_return": _round(gap.realised_return),
        "return_gap": _round(gap.return_gap),
        "claimed_hit_rate": _text(claimed.claimed_hit_rate),
        "realised_hit_rate": _round(gap.realised_hit_rate),
        "hit_rate_gap": _round(gap.hit_rate_gap),
        "say_do": verdict.say_do if verdict is not None else None,
        "judge_model": verdict.judge_model if verdict is not None else None,
        "judged_at": verdict.judged_at.isoformat() if verdict is not None else None,
        "judge_direction": verdict.direction if verdict is not None else None,
        "judge_indicators": verdict.indicators if verdict is not None else None,
        "judge_exits": verdict.exits if verdict is not None else None,
        "judge_no_extra_rule": verdict.no_extra_rule if verdict is not None else None,
        "judge_rationale": verdict.rationale if verdict is not None else None,
        "say_do_by_judge": {j.judge_model: j.say_do for j in score.judgements},
        "say_do_rule": _round(score.rule_say_do),
        "do_real": _round(credits.score) if credits is not None else None,
        "runs_valid": credits.runs_valid if credits is not None else None,
        "signals_vary": credits.signals_vary if credits is not None else None,
        "no_lookahead": credits.no_lookahead if credits is not None else None,
        "say_result": score.say_result,
        "claims_beat_buy_and_hold": score.claims.beat_buy_and_hold,
        "claims_sharpe": score.claims.sharpe,
        "claims_profit": score.claims.profit,
        "total_return": _round(outcome.total_return),
        "sharpe_ratio": _round(outcome.sharpe),
        "buy_and_hold_return": _round(outcome.buy_and_hold_return),
        "buy_and_hold_sharpe": _round(outcome.buy_and_hold_sharpe),
        "realised_edge": _round(score.realised_edge),
        "beats_buy_and_hold": outcome.beats_buy_and_hold,
        "position_density": _round(score.position_density),
    }


def summary_entry(scores: Sequence[StrategyScore]) -> dict[str, Any]:
    """The agent's summary: the mean of each gap, and the buy-and-hold counts."""
    return {
        "strategies": len(scores),
        "say_do": _mean([s.say_do for s in scores]),
        "say_do_rule": _mean([s.rule_say_do for s in scores]),
        "do_real": _mean([None if s.do_real is None else s.do_real.score for s in scores]),
        "say_result": _mean([s.say_result for s in scores]),
        "compared_with_buy_and_hold": sum(
            1 for s in scores if s.outcome.beats_buy_and_hold is not None
        ),
        "beat_buy_and_hold": sum(1 for s in scores if s.outcome.beats_buy_and_hold),
        "claimed_to_beat_buy_and_hold": sum(1 for s in scores if s.claims.beat_buy_and_hold),
        "claimed_and_beat_buy_and_hold": sum(
            1 for s in scores if s.claims.beat_buy_and_hold and s.outcome.beats_buy_and_hold
        ),
    }


def _mean(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return round(math.fsum(known) / len(known), _PLACES) if known else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, _PLACES)
