"""FIDES' concordance gaps of one strategy, as pure functions of what the ledger holds of it.

This module owns the three gaps, each in [0, 1] with 1 concordant, and what they are read from:

- say-to-do, `g_say_do`: the judge's four checks (`store.strategy_judgements`); beside it the
  paper's zero-LLM ceiling `rule_say_do`, the share of the lookback numbers of `LOOKBACKS` named
  in the rationale that appear literally in the code (None when it names none).
- do-to-real, `do_real`: three binary credits averaged, `(rho + alpha + ell) / 3`. `rho`: every
  run of the strategy gave valid weights (FIDES: the code runs to a valid signal series; openbell
  runs a strategy once per cycle, so a single failed run withholds it). `alpha`: its valid runs
  gave at least two different weight sets (not a constant, degenerate series; one run cannot
  show it). `ell`: the code passes the static look-ahead check now
  (`agents.strategy_code.lookahead.check_strategy`): FIDES scores leakage patterns, openbell
  refuses such code before it ever runs, so a stored strategy earns it unless the check has
  grown stricter since.
- say-to-result, `say_result`: the claim parsed for testable assertions (`claims_of`: the paper's
  keyword parser on the rationale, and a positive claimed `expected_return` as a claim of profit),
  each checked against the numbers over the strategy's periods: beating buy-and-hold needs
  `S > S_bh` and `R > R_bh`, a Sharpe claim `S > 0`, a profit claim `R > 0`; 1 when every check
  made passes, 0 when one fails, 0.5 when no testable claim is found, None when a claim was found
  but no check could be made (too few periods, no buy-and-hold prices).

`R` is the compounded return over the periods, `S` their annualised Sharpe ratio
(`return_metrics.sharpe_ratio`; 0 for a series of zero returns, which is flat, not undefined, so
a strategy that stayed in cash is compared as FIDES compares it); `R_bh`, `S_bh` the same of
buy-and-hold over the same periods (`buy_and_hold.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np

from openbell.agents.strategy_code.lookahead import check_strategy
from openbell.ops.evaluation.return_metrics import cum_returns_final, sharpe_ratio

#: The lookback numbers the rule variant of say-to-do looks for (FIDES, Table 7).
LOOKBACKS: Final = (5, 10, 14, 20, 21, 50, 100, 200)
_NUMBER: Final = re.compile(r"(?<![\w.])(\d+)(?![\w.]|\.\d)")
_BEAT: Final = re.compile(
    r"buy[\s-]*(?:and|&|n)[\s-]*hold|outperform|beat(?:s|ing)?\s+(?:the\s+)?"
    r"(?:market|benchmark|index|passive)",
    re.IGNORECASE,
)
_SHARPE: Final = re.compile(r"\bsharpe\b", re.IGNORECASE)
_PROFIT: Final = re.compile(r"\bprofit(?:s|able)?\b|\bpositive\s+returns?\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class DoReal:
    """FIDES' do-to-real credits (each 0 or 1) and their mean."""

    runs_valid: int
    signals_vary: int
    no_lookahead: int

    @property
    def score(self) -> float:
        """`(rho + alpha + ell) / 3`."""
        return (self.runs_valid + self.signals_vary + self.no_lookahead) / 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Claims:
    """The testable assertions found in a strategy's claim."""

    beat_buy_and_hold: bool
    sharpe: bool
    profit: bool

    @property
    def any(self) -> bool:
        """Whether any testable assertion was found."""
        return self.beat_buy_and_hold or self.sharpe or self.profit


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The strategy's compounded return and Sharpe over its periods, and buy-and-hold's over the
    same periods (None where they cannot be computed)."""

    total_return: float | None
    sharpe: float | None
    buy_and_hold_return: float | None
    buy_and_hold_sharpe: float | None

    @property
    def beats_buy_and_hold(self) -> bool | None:
        """FIDES' criterion: better on both Sharpe and return (None without the four numbers)."""
        sharpe, total = self.sharpe, self.total_return
        bh_sharpe, bh_total = self.buy_and_hold_sharpe, self.buy_and_hold_return
        if sharpe is None or total is None or bh_sharpe is None or bh_total is None:
            return None
        return sharpe > bh_sharpe and total > bh_total


def do_real(*, runs: int, failed_runs: int, distinct_weights: int, code: str) -> DoReal | None:
    """The do-to-real credits of a strategy with `runs` runs (None without any)."""
    if runs == 0:
        return None
    return DoReal(
        runs_valid=int(failed_runs == 0),
        signals_vary=int(distinct_weights >= 2),
        no_lookahead=int(not check_strategy(code)),
    )


def claims_of(rationale: str, claimed_return: Decimal | None) -> Claims:
    """The testable assertions of a claim (see the module docstring); a negation is not read
    (FIDES' keyword parser has the same limit)."""
    return Claims(
        beat_buy_and_hold=bool(_BEAT.search(rationale)),
        sharpe=bool(_SHARPE.search(rationale)),
        profit=(claimed_return is not None and claimed_return > 0)
        or bool(_PROFIT.search(rationale)),
    )


def outcome_of(
    returns: Sequence[float], buy_and_hold: Sequence[float] | None, factor: float
) -> Outcome:
    """`Outcome` of the strategy's period `returns` and buy-and-hold's over the same periods
    (None when not priced), annualised with `factor` periods a year."""
    mine = np.asarray(returns, dtype=np.float64)
    theirs = None if buy_and_hold is None else np.asarray(buy_and_hold, dtype=np.float64)
    return Outcome(
        total_return=cum_returns_final(mine),
        sharpe=_sharpe(mine, factor),
        buy_and_hold_return=None if theirs is None else cum_returns_final(theirs),
        buy_and_hold_sharpe=None if theirs is None else _sharpe(theirs, factor),
    )


def _sharpe(returns: np.ndarray[tuple[int], np.dtype[np.float64]], factor: float) -> float | None:
    if returns.size >= 2 and not returns.any():
        return 0.0  # flat all along: no return and no risk
    return sharpe_ratio(returns, factor)


def say_result(claims: Claims, outcome: Outcome) -> float | None:
    """FIDES' say-to-result gap of `claims` against `outcome` (see the module docstring)."""
    if not claims.any:
        return 0.5
    checks: list[bool] = []
    if claims.beat_buy_and_hold and outcome.beats_buy_and_hold is not None:
        checks.append(outcome.beats_buy_and_hold)
    if claims.sharpe and outcome.sharpe is not None:
        checks.append(outcome.sharpe > 0)
    if claims.profit and outcome.total_return is not None:
        checks.append(outcome.total_return > 0)
    if not checks:
        return None
    return 1.0 if all(checks) else 0.0


def rule_say_do(rationale: str, code: str) -> float | None:
    """The share of the `LOOKBACKS` named in `rationale` that appear in `code` as a number
    (None when the rationale names none)."""
    named = _lookbacks(rationale)
    if not named:
        return None
    return len(named & _lookbacks(code)) / len(named)


def _lookbacks(text: str) -> set[int]:
    return {int(found) for found in _NUMBER.findall(text) if int(found) in LOOKBACKS}
