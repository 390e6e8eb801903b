"""The JSON API's concordance document as pydantic models (FIDES,
`ops/evaluation/concordance/record.py`).

This module owns what `GET /api/v1/agents/{agent}/{market}/concordance` promises, field for field
(`extra="forbid"`: the tests validate every response against it, as `ops.web.schemas` does for the
other documents): each strategy's entry of `openbell report` and the agent's summary.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openbell.ops.web.schemas import Account, DecimalText, Instant

Bit = int


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConcordanceStrategy(_Document):
    """One strategy: its claim and outcome, and FIDES' three gaps with their parts (`say_do` and
    the `judge_*` fields are the newest verdict's; null before any `openbell judge`)."""

    strategy: int = Field(ge=1, description="1 for the first strategy written, and so on.")
    written_at: Instant
    answers: int
    runs: int
    failed_runs: int
    periods: int
    claimed_return: DecimalText | None
    realised_return: float | None
    return_gap: float | None
    claimed_hit_rate: DecimalText | None
    realised_hit_rate: float | None
    hit_rate_gap: float | None
    say_do: float | None
    judge_model: str | None
    judged_at: Instant | None
    judge_direction: Bit | None
    judge_indicators: Bit | None
    judge_exits: Bit | None
    judge_no_extra_rule: Bit | None
    judge_rationale: str | None
    say_do_by_judge: dict[str, float] = Field(description="Every judge model's say-to-do gap.")
    say_do_rule: float | None
    do_real: float | None
    runs_valid: Bit | None
    signals_vary: Bit | None
    no_lookahead: Bit | None
    say_result: float | None
    claims_beat_buy_and_hold: bool
    claims_sharpe: bool
    claims_profit: bool
    total_return: float | None
    sharpe_ratio: float | None
    buy_and_hold_return: float | None
    buy_and_hold_sharpe: float | None
    realised_edge: float | None
    beats_buy_and_hold: bool | None
    position_density: float | None


class ConcordanceSummary(_Document):
    """The agent's row of FIDES' leaderboard: each gap's mean over the strategies that have it,
    and the buy-and-hold counts."""

    strategies: int
    say_do: float | None
    say_do_rule: float | None
    do_real: float | None
    say_result: float | None
    compared_with_buy_and_hold: int
    beat_buy_and_hold: int
    claimed_to_beat_buy_and_hold: int
    claimed_and_beat_buy_and_hold: int


class Concordance(_Document):
    """`GET /api/v1/agents/{agent}/{market}/concordance`: a strategy-code agent's strategies
    (none for another kind of agent) and its summary."""

    account: Account
    strategies: list[ConcordanceStrategy]
    summary: ConcordanceSummary
