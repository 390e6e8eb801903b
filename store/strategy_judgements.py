"""The say-to-do verdicts of a strategy (FIDES): a judge model's four checks of a strategy's code
against its rationale, stored per strategy and judge model.

This module owns the `strategy_judgement` table and its reads and writes, on behalf of `Ledger`
(of which `StrategyJudgements` is a part). A verdict is FIDES' four binary checks (`direction`,
`indicators`, `exits`, `no_extra_rule`), the judge's rationale, its model's name and when it was
given. A strategy keeps one verdict per judge model: judging it again with the same model replaces
that verdict (its row is deleted and a new one written, so the newest verdict has the largest id);
a verdict of another model is kept beside it. Judging reads the stored code and rationale only:
no strategy is run again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Row, bindparam, delete, insert, select

from openbell.markets.domain import check_utc
from openbell.store.core_tables import STRATEGY_JUDGEMENT_TABLE
from openbell.store.rows import LedgerTables, row_id

#: The four checks of a verdict, in FIDES' order (d, i, x, m).
CHECKS: Final = ("direction", "indicators", "exits", "no_extra_rule")


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyJudgement:
    """A judge's verdict on strategy `strategy_id`: each check 1 (holds) or 0 (does not)."""

    strategy_id: int
    judge_model: str
    judged_at: datetime
    direction: int
    indicators: int
    exits: int
    no_extra_rule: int
    rationale: str
    judgement_id: int | None = None

    def __post_init__(self) -> None:
        check_utc("judged_at", self.judged_at)
        if not self.judge_model:
            raise ValueError("a verdict names its judge's model")
        for check in CHECKS:
            if getattr(self, check) not in (0, 1):
                raise ValueError(f"{check} is 0 or 1, got {getattr(self, check)!r}")

    @property
    def say_do(self) -> float:
        """FIDES' say-to-do gap: the mean of the four checks, in [0, 1] (1: concordant)."""
        return (self.direction + self.indicators + self.exits + self.no_extra_rule) / 4


class StrategyJudgements(LedgerTables):
    """The strategies' say-to-do verdicts (see the module docstring)."""

    def save_judgement(self, judgement: StrategyJudgement) -> StrategyJudgement:
        """Store `judgement` in place of the same model's earlier verdict on the strategy; the
        stored one, with its id."""
        with self._writing() as connection:
            connection.execute(
                delete(_TABLE).where(
                    _TABLE.c.strategy_id == judgement.strategy_id,
                    _TABLE.c.judge_model == judgement.judge_model,
                )
            )
            added = insert(_TABLE).values(
                strategy_id=judgement.strategy_id,
                judge_model=judgement.judge_model,
                judged_at=judgement.judged_at,
                direction=judgement.direction,
                indicators=judgement.indicators,
                exits=judgement.exits,
                no_extra_rule=judgement.no_extra_rule,
                rationale=judgement.rationale,
            )
            row = connection.execute(added.returning(*_TABLE.c)).one()
        return _judgement(row)

    def judgements(self, strategy_ids: Collection[int]) -> dict[int, list[StrategyJudgement]]:
        """The verdicts on each of `strategy_ids`, oldest first (the last is the newest); a
        strategy never judged has none."""
        found: dict[int, list[StrategyJudgement]] = {key: [] for key in strategy_ids}
        if not found:
            return found
        with self._reading() as connection:
            rows = connection.execute(_JUDGEMENTS, {"strategies": sorted(found)}).all()
        for row in rows:
            found[row.strategy_id].append(_judgement(row))
        return found


def _judgement(row: Row[Any]) -> StrategyJudgement:
    return StrategyJudgement(
        judgement_id=row_id(row.id),
        strategy_id=row.strategy_id,
        judge_model=row.judge_model,
        judged_at=row.judged_at,
        direction=row.direction,
        indicators=row.indicators,
        exits=row.exits,
        no_extra_rule=row.no_extra_rule,
        rationale=row.rationale,
    )


_TABLE: Final = STRATEGY_JUDGEMENT_TABLE
_JUDGEMENTS: Final = (
    select(_TABLE)
    .where(_TABLE.c.strategy_id.in_(bindparam("strategies", expanding=True)))
    .order_by(_TABLE.c.id)
)
